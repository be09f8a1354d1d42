package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// countingProxy sits between a client and the server and counts the
// client's protocol messages: each Sync ('S') or simple Query ('Q') is one
// round trip, each Execute ('E') or Query one statement, each Parse ('P') a
// statement prepared. It measures what the client sends, with no help from
// the server (pg_stat_statements is usually not loaded).
type countingProxy struct {
	ln     net.Listener
	target string
	counts [256]atomic.Int64
	wg     sync.WaitGroup
}

func startProxy(target string) (*countingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *countingProxy) addr() string { return p.ln.Addr().String() }

func (p *countingProxy) close() {
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *countingProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *countingProxy) handle(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	go func() {
		_, _ = io.Copy(c, s)
		_ = c.Close()
	}()
	defer s.Close()
	// Untyped startup messages first (SSLRequest/GSSENCRequest, then StartupMessage).
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		code := binary.BigEndian.Uint32(hdr[4:])
		body := make([]byte, int(n)-8)
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		if _, err := s.Write(append(hdr[:], body...)); err != nil {
			return
		}
		if code != 80877103 && code != 80877104 { // not SSL/GSS request: that was the startup
			break
		}
	}
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		body := make([]byte, int(n)-4)
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		p.counts[hdr[0]].Add(1)
		if _, err := s.Write(append(hdr[:], body...)); err != nil {
			return
		}
	}
}

type protoCounts struct{ roundTrips, statements, parses int64 }

func (p *countingProxy) snapshot() protoCounts {
	return protoCounts{
		roundTrips: p.counts['S'].Load() + p.counts['Q'].Load(),
		statements: p.counts['E'].Load() + p.counts['Q'].Load(),
		parses:     p.counts['P'].Load(),
	}
}

// viaProxy returns dbURL rewritten to go through the proxy.
func viaProxy(dbURL string, p *countingProxy) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("round-trip counting needs a URL-form database address")
	}
	u.Host = p.addr()
	return u.String(), nil
}

func targetOf(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("round-trip counting needs a URL-form database address with a host")
	}
	if !strings.Contains(u.Host, ":") {
		return u.Host + ":5432", nil
	}
	return u.Host, nil
}

// rtOp is one operation whose protocol traffic is counted.
type rtOp struct {
	name string
	run  func(ctx context.Context, i int) error
}

// countOps runs each op warm times (statement caches fill), then n times,
// and reports round trips, statements and parses per operation.
func countOps(ctx context.Context, p *countingProxy, ops []rtOp, warm, n int) ([]string, error) {
	lines := []string{"| operation | round trips/op | statements/op | statements prepared/op | latency p50 (1 client, via proxy) |", "|---|---|---|---|---|"}
	for _, op := range ops {
		for i := 0; i < warm; i++ {
			if err := op.run(ctx, i); err != nil {
				return nil, fmt.Errorf("%s: %w", op.name, err)
			}
		}
		c0 := p.snapshot()
		var lat []time.Duration
		for i := warm; i < warm+n; i++ {
			t := time.Now()
			if err := op.run(ctx, i); err != nil {
				return nil, fmt.Errorf("%s: %w", op.name, err)
			}
			lat = append(lat, time.Since(t))
		}
		c1 := p.snapshot()
		f := func(a, b int64) string { return fmt.Sprintf("%.2f", float64(b-a)/float64(n)) }
		lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s | %s |", op.name, f(c0.roundTrips, c1.roundTrips),
			f(c0.statements, c1.statements), f(c0.parses, c1.parses), ms(percentile(lat, 0.5))))
	}
	return lines, nil
}

// roundTrips counts the protocol traffic of the allocator's operations, of
// the experiments, and of the pgbench-like INSERT, through the proxy.
func (r *runner) roundTrips(ctx context.Context, dbURL string) error {
	target, err := targetOf(dbURL)
	if err != nil {
		r.rep.warn("round trips not counted: %v", err)
		return nil
	}
	p, err := startProxy(target)
	if err != nil {
		return err
	}
	defer p.close()
	pu, err := viaProxy(dbURL, p)
	if err != nil {
		return err
	}
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: pu, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return err
	}
	defer st.Close()
	cl, err := newCluster(ctx, st, "rt")
	if err != nil {
		return err
	}
	v4, err := st.CreatePool(ctx, ipam.Pool{ClusterID: cl.ID, Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.64.0.0/20")}})
	if err != nil {
		return err
	}
	vp, err := r.variantSetup(ctx, pu)
	if err != nil {
		return err
	}
	pc, err := pgxpool.ParseConfig(pu)
	if err != nil {
		return err
	}
	pc.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	owner := func(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
	var planned sync.Map // i -> the address the plan-time hold showed
	ops := []rtOp{
		{"pgbench-like INSERT (autocommit)", func(ctx context.Context, i int) error {
			_, err := conn.Exec(ctx, `INSERT INTO bench_insert (client, note) VALUES ($1, 'pgbench reference row')`, i)
			return err
		}},
		{"Client.Allocate instance (fresh; ipam_instance_address, ipam.AllocateInstance)", func(ctx context.Context, i int) error {
			_, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.ClusterPools(cl.ID), Owner: instanceOwner(owner("a", i))})
			return err
		}},
		{"Client.Allocate ipv4 (table pool)", func(ctx context.Context, i int) error {
			id := owner("e", i)
			_, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: v4.Ref(),
				Owner: ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: id, EnvID: id, OrgID: "acme"}})
			return err
		}},
		{"Client.Reserve instance (plan-time hold)", func(ctx context.Context, i int) error {
			a, err := st.Reserve(ctx, ipam.AllocateRequest{Pool: ipam.ClusterPools(cl.ID), Owner: instanceOwner(owner("h", i))}, time.Hour)
			planned.Store(i, a.Address)
			return err
		}},
		{"Client.Allocate instance (apply of a held plan)", func(ctx context.Context, i int) error {
			addr, _ := planned.Load(i)
			a, _ := addr.(netip.Addr)
			_, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.ClusterPools(cl.ID), Owner: instanceOwner(owner("h", i)), Address: a})
			return err
		}},
		{"Client.GetActive (refresh)", func(ctx context.Context, i int) error {
			_, err := st.GetActive(ctx, cl.ID, ipam.OwnerInstance, owner("a", i))
			return err
		}},
		{"Client.Release instance", func(ctx context.Context, i int) error {
			_, err := st.Release(ctx, cl.ID, instanceOwner(owner("a", i)), 0)
			return err
		}},
		{"experiment: 1 statement", func(ctx context.Context, i int) error {
			return oneStatement(ctx, conn.Conn(), vp, owner("x", i))
		}},
		{"experiment: 2 round trips", func(ctx context.Context, i int) error {
			return twoRoundTrips(ctx, conn.Conn(), vp, owner("y", i))
		}},
	}
	lines, err := countOps(ctx, p, ops, 10, r.sz.RoundTripOps)
	if err != nil {
		return err
	}
	r.rep.note("Round trips per operation (client protocol messages counted by a proxy; Sync or simple Query = 1 round trip)", lines)
	for _, v := range variants {
		r.rep.note("Experiment — "+v.name, []string{v.desc + "."})
	}
	return nil
}
