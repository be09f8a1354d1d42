package engine_test

import (
	"context"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// A call whose server stops answering (its processes stopped, say) while
// the call waits is not silent: each WaitReportInterval, when a look aside
// from it has no answer either, OnWait is told that the database does not
// answer (Wait.Stalled), with how long the call has waited. It was told
// nothing until the server came back (found by a trial of the scheduler's
// API, with SIGSTOP). The test stops a proxy between the client and the
// server instead, while an allocation waits for a lock another session
// holds: first a lock wait is reported, then the silence.
func TestACallToAServerThatStoppedAnsweringIsReported(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p := startFreezingProxy(t, u.Host)
	u.Host = p.addr
	var mu sync.Mutex
	var waits []engine.Wait
	holder, calls := lockWaitWorld(t, u.String(), 40*time.Second, func(_ context.Context, w engine.Wait) {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, w)
	})
	ctx := context.Background()
	direct, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	tx, err := direct.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM ipam_pools WHERE id = 'c1/v4' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	_ = holder
	done := make(chan error, 1)
	go func() { done <- calls[1].call() }()
	seen := func(stalled bool) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range waits {
			if w.Stalled == stalled && w.Lock != stalled {
				return true
			}
		}
		return false
	}
	wait := func(stalled bool) bool {
		for deadline := time.Now().Add(engine.WaitReportInterval*2 + 5*time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if seen(stalled) {
				return true
			}
		}
		return false
	}
	lock := wait(false)
	p.frozen.Store(true)
	silence := wait(true)
	p.frozen.Store(false)
	_ = tx.Rollback(ctx)
	if err := <-done; err != nil {
		t.Errorf("the allocation once the lock is free and the server answers: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !lock || !silence {
		t.Fatalf("the reports: %+v; want a lock wait, then that the database does not answer", waits)
	}
	for _, w := range waits {
		if w.Stalled {
			t.Logf("%s", w)
			if w.Waited < engine.WaitReportInterval {
				t.Errorf("%s: the call waited longer than that", w)
			}
			break
		}
	}
}

// freezingProxy forwards TCP connections to a server, and while frozen
// forwards nothing (it reads, and holds what it read until it thaws).
type freezingProxy struct {
	addr   string
	frozen atomic.Bool
}

func startFreezingProxy(t *testing.T, target string) *freezingProxy {
	t.Helper()
	p := &freezingProxy{}
	p.addr = serveTCP(t, func(c net.Conn) {
		s, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			return
		}
		for _, pair := range [][2]net.Conn{{c, s}, {s, c}} {
			go p.forward(pair[0], pair[1])
		}
	})
	return p
}

// forward copies from one side to the other, holding what it read while
// the proxy is frozen, until either side ends.
func (p *freezingProxy) forward(from, to net.Conn) {
	defer from.Close()
	defer to.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		for p.frozen.Load() {
			time.Sleep(20 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
