package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// Machine describes where the figures come from.
type Machine struct {
	NProc          int
	MemTotal       string
	CPUModel       string
	Kernel         string
	OS             string
	GoVersion      string
	PGVersion      string
	PGVersionShort string
	Terraform      string
	Pgbench        string
	Settings       map[string]string
	Durable        bool
	LoadStart      string
	LoadEnd        string
	// ServerCPU is true when the server's CPU time can be read from /proc
	// (the server runs on this machine).
	ServerCPU bool
}

// server is the admin connection and what we know about the server process.
type server struct {
	adminURL   string
	conn       *pgx.Conn
	postmaster int // 0 when the server's processes cannot be read
	// walinspect: pg_walinspect is usable on the admin connection (the
	// index entries per operation are read from the WAL with it);
	// dropWalinspect: the suite created it, and drops it at the end.
	walinspect, dropWalinspect bool
}

func connectServer(ctx context.Context, adminURL string) (*server, error) {
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to the server: %w", err)
	}
	s := &server{adminURL: adminURL, conn: c}
	var pidFile string
	if err := c.QueryRow(ctx, `SELECT pg_read_file('postmaster.pid')`).Scan(&pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(pidFile, "\n", 2)[0])); err == nil {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
				s.postmaster = pid
			}
		}
	}
	return s, nil
}

func (s *server) close() {
	if s.dropWalinspect {
		_, _ = s.conn.Exec(context.Background(), "DROP EXTENSION IF EXISTS pg_walinspect")
	}
	_ = s.conn.Close(context.Background())
}

// dbURL is the admin URL pointed at another database.
func (s *server) dbURL(db string) string {
	u, err := url.Parse(s.adminURL)
	if err != nil || u.Scheme == "" {
		// keyword/value form
		return s.adminURL + " dbname=" + db
	}
	u.Path = "/" + db
	return u.String()
}

// createDB creates a fresh, migrated database.
func (r *runner) createDB(ctx context.Context, purpose string) (string, error) {
	name := "ipambench_" + purpose + "_" + r.tag
	if _, err := r.srv.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := r.srv.conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	r.dbs = append(r.dbs, name)
	u := r.srv.dbURL(name)
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: u, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return "", err
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		return "", fmt.Errorf("migrating %s: %w", name, err)
	}
	return u, nil
}

func (r *runner) dropDatabases() {
	if r.cfg.Keep {
		if len(r.dbs) > 0 {
			r.logf("keeping databases %s", strings.Join(r.dbs, ", "))
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, db := range r.dbs {
		if _, err := r.srv.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			r.logf("dropping %s: %v", db, err)
		}
	}
}

func (r *runner) machine(ctx context.Context) Machine {
	m := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), Settings: map[string]string{}, LoadStart: loadAvg(),
		ServerCPU: r.srv.postmaster != 0}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				f := strings.Fields(l)
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					m.MemTotal = fmt.Sprintf("%.1f GiB", kb/1024/1024)
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m.CPUModel = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.Kernel = utsString(u.Sysname[:]) + " " + utsString(u.Release[:])
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	_ = r.srv.conn.QueryRow(ctx, `SELECT version(), current_setting('server_version')`).Scan(&m.PGVersion, &m.PGVersionShort)
	m.PGVersionShort = "PostgreSQL " + m.PGVersionShort
	for _, k := range []string{"fsync", "synchronous_commit", "full_page_writes", "wal_level", "shared_buffers",
		"max_wal_size", "checkpoint_timeout", "max_connections", "shared_preload_libraries"} {
		var v string
		_ = r.srv.conn.QueryRow(ctx, `SELECT current_setting($1)`, k).Scan(&v)
		m.Settings[k] = v
	}
	m.Durable = m.Settings["fsync"] == "on" && m.Settings["synchronous_commit"] != "off"
	if tf := r.terraformPath(); tf != "" {
		if out, err := exec.Command(tf, "version").Output(); err == nil {
			m.Terraform = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
		}
	}
	if pb := r.pgbenchPath(); pb != "" {
		if out, err := exec.Command(pb, "--version").Output(); err == nil {
			m.Pgbench = strings.TrimSpace(string(out))
		}
	}
	return m
}

func utsString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// terraformPath finds terraform: the flag, TF_ACC_TERRAFORM_PATH, PATH.
func (r *runner) terraformPath() string {
	for _, p := range []string{r.cfg.TerraformPath, os.Getenv("TF_ACC_TERRAFORM_PATH")} {
		if p != "" {
			return p
		}
	}
	if p, err := exec.LookPath("terraform"); err == nil {
		return p
	}
	return ""
}

// pgbenchPath finds pgbench: the flag, PATH, then the newest
// /usr/lib/postgresql/*/bin (where scripts/pg.sh finds the server).
func (r *runner) pgbenchPath() string {
	if r.cfg.PgbenchPath != "" {
		return r.cfg.PgbenchPath
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	best, bestV := "", -1
	for _, p := range ms {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		if err == nil && v > bestV {
			best, bestV = p, v
		}
	}
	return best
}

// cpuTimes reads the CPU time of the server (postmaster, its live children,
// and the children it has reaped) and of this process.
type cpuTimes struct {
	server time.Duration
	client time.Duration
	ok     bool
}

const clockTick = 100 // USER_HZ on Linux

// cpuStart and cpuEnd bracket a measurement. The client's time is read
// inside the bracket and the server's outside it, so that the scan of /proc
// (in this process) does not count as client time.
func (s *server) cpuStart() cpuTimes {
	t := cpuTimes{}
	t.server, t.ok = s.serverCPU()
	t.client = clientCPU()
	return t
}

func (s *server) cpuEnd() cpuTimes {
	t := cpuTimes{client: clientCPU()}
	t.server, t.ok = s.serverCPU()
	return t
}

func clientCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (s *server) serverCPU() (time.Duration, bool) {
	if s.postmaster == 0 {
		return 0, false
	}
	f, ok := procStat(s.postmaster)
	if !ok {
		return 0, false
	}
	ticks := f[11] + f[12] + f[13] + f[14] // utime stime cutime cstime
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, ok := procStat(pid); ok && c[1] == int64(s.postmaster) {
			ticks += c[11] + c[12]
		}
	}
	return time.Duration(ticks) * time.Second / clockTick, true
}

// procStat returns the numeric fields of /proc/PID/stat after the command
// name: index 0 is the state (as 0), 1 the parent pid, 11..14 utime, stime,
// cutime, cstime.
func procStat(pid int) ([]int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 15 {
		return nil, false
	}
	out := make([]int64, len(fields))
	for k, f := range fields {
		out[k], _ = strconv.ParseInt(f, 10, 64)
	}
	return out, true
}

// procStatus reads one "Key:  value kB" line of /proc/PID/status, in kB.
func procStatus(pid int, key string) (int64, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			fs := strings.Fields(v)
			if len(fs) > 0 {
				n, err := strconv.ParseInt(fs[0], 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// walLSN is the server's current WAL position, for WAL bytes per operation.
func (s *server) walLSN(ctx context.Context) int64 {
	var n int64
	_ = s.conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&n)
	return n
}

// insertLSN is the server's WAL insert position: the start and end of the
// WAL a measurement reads back (walWriteSet).
func (s *server) insertLSN(ctx context.Context) string {
	var l string
	_ = s.conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&l)
	return l
}

// useWalinspect makes pg_walinspect usable on the admin connection
// (creating it in the admin database when it is missing, and dropping it
// again at the end), or says why not.
func (s *server) useWalinspect(ctx context.Context) error {
	if s.walinspect {
		return nil
	}
	var have bool
	if err := s.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_walinspect')`).Scan(&have); err != nil {
		return err
	}
	if !have {
		if _, err := s.conn.Exec(ctx, "CREATE EXTENSION pg_walinspect"); err != nil {
			return fmt.Errorf("pg_walinspect (PostgreSQL 15 or later, contrib): %w", err)
		}
		s.dropWalinspect = true
	}
	s.walinspect = true
	return nil
}

// writeSet is what a measurement wrote, read back from the WAL records
// between two insert positions (pg_walinspect's pg_get_wal_records_info):
// index entries, heap row versions, and index entries by relation.
type writeSet struct {
	ok bool
	// indexEntries: entries added to an index's leaf level: B-tree
	// INSERT_LEAF and INSERT_POST records, and leaf page splits (a split's
	// record carries the new entry: level 0 in its description), plus the
	// writes of other index kinds (GiST page updates and splits, BRIN
	// summary inserts and updates, GIN, hash, SP-GiST inserts).
	indexEntries int64
	// heapInserts, heapUpdates (a new version with its own index entries)
	// and heapHOT (heap-only: no index entry) are row versions written.
	heapInserts, heapUpdates, heapHOT int64
	// byRel: index entries by "dboid/relfilenode".
	byRel map[string]int64
}

func (w *writeSet) add(o writeSet) {
	if !o.ok {
		w.ok = false
		return
	}
	w.indexEntries += o.indexEntries
	w.heapInserts += o.heapInserts
	w.heapUpdates += o.heapUpdates
	w.heapHOT += o.heapHOT
	if w.byRel == nil {
		w.byRel = map[string]int64{}
	}
	for k, v := range o.byRel {
		w.byRel[k] += v
	}
}

// walWriteSetSQL classifies each WAL record between $1 and $2 of the
// server (every database: the measurement's clients are the only writers
// the suite runs, as for WAL/op).
const walWriteSetSQL = `SELECT coalesce(substring(block_ref from 'rel [0-9]+/([0-9]+/[0-9]+)'), ''),
		CASE
			WHEN resource_manager = 'Btree' AND (record_type IN ('INSERT_LEAF', 'INSERT_POST')
				OR (record_type IN ('SPLIT_L', 'SPLIT_R') AND description LIKE 'level 0,%')) THEN 'index'
			WHEN resource_manager = 'Gist' AND record_type IN ('PAGE_UPDATE', 'PAGE_SPLIT') THEN 'index'
			WHEN resource_manager = 'BRIN' AND record_type IN ('INSERT', 'UPDATE', 'SAMEPAGE_UPDATE') THEN 'index'
			WHEN resource_manager IN ('GIN', 'Hash', 'SPGist') AND record_type LIKE 'INSERT%' THEN 'index'
			WHEN resource_manager = 'Heap' AND record_type LIKE 'INSERT%' THEN 'insert'
			WHEN resource_manager = 'Heap2' AND record_type LIKE 'MULTI_INSERT%' THEN 'insert'
			WHEN resource_manager = 'Heap' AND record_type LIKE 'HOT_UPDATE%' THEN 'hot'
			WHEN resource_manager = 'Heap' AND record_type LIKE 'UPDATE%' THEN 'update'
		END AS kind, count(*)
	FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
	GROUP BY 1, 2`

// walWriteSet reads what the WAL between from and to (insert positions)
// says was written. It first makes the server flush its WAL up to now (a
// transactional logical message committed with synchronous_commit on: a
// commit that wrote WAL flushes it, on a server with synchronous_commit off
// too): pg_walinspect reads only flushed WAL.
func (s *server) walWriteSet(ctx context.Context, from, to string) (writeSet, error) {
	w := writeSet{byRel: map[string]int64{}}
	if from == "" || to == "" {
		return w, fmt.Errorf("no WAL position")
	}
	if err := s.useWalinspect(ctx); err != nil {
		return w, err
	}
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return w, err
	}
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		_ = tx.Rollback(ctx)
		return w, err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(true, 'ipambench', 'flush')"); err != nil {
		_ = tx.Rollback(ctx)
		return w, err
	}
	if err := tx.Commit(ctx); err != nil {
		return w, err
	}
	rows, err := s.conn.Query(ctx, walWriteSetSQL, from, to)
	if err != nil {
		return w, err
	}
	defer rows.Close()
	for rows.Next() {
		var rel string
		var kind *string
		var n int64
		if err := rows.Scan(&rel, &kind, &n); err != nil {
			return w, err
		}
		if kind == nil {
			continue
		}
		switch *kind {
		case "index":
			w.indexEntries += n
			w.byRel[rel] += n
		case "insert":
			w.heapInserts += n
		case "update":
			w.heapUpdates += n
		case "hot":
			w.heapHOT += n
		}
	}
	w.ok = rows.Err() == nil
	return w, rows.Err()
}

func (s *server) checkpoint(ctx context.Context) {
	_, _ = s.conn.Exec(ctx, "CHECKPOINT")
}
