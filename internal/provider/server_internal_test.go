package provider

import (
	"context"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// contextKeeper does with request contexts what the framework's server does:
// each request registers a cancel function that only StopProvider calls and
// forgets. It reports a request whose context was canceled while it ran.
type contextKeeper struct {
	tfprotov6.ProviderServer // nil: only the methods below are called
	mu                       sync.Mutex
	cancels                  []context.CancelFunc
	canceledInFlight         atomic.Int64
}

func (k *contextKeeper) register(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cancels = append(k.cancels, cancel)
	return ctx
}

func (k *contextKeeper) kept() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.cancels)
}

func (k *contextKeeper) ReadResource(ctx context.Context, _ *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	ctx = k.register(ctx)
	time.Sleep(50 * time.Microsecond)
	if ctx.Err() != nil {
		k.canceledInFlight.Add(1)
	}
	return &tfprotov6.ReadResourceResponse{}, nil
}

func (k *contextKeeper) StopProvider(context.Context, *tfprotov6.StopProviderRequest) (*tfprotov6.StopProviderResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.cancels {
		c()
	}
	k.cancels = nil
	return &tfprotov6.StopProviderResponse{}, nil
}

func (k *contextKeeper) ValidateListResourceConfig(context.Context, *tfprotov6.ValidateListResourceConfigRequest) (*tfprotov6.ValidateListResourceConfigResponse, error) {
	return &tfprotov6.ValidateListResourceConfigResponse{}, nil
}

func (k *contextKeeper) ListResource(ctx context.Context, _ *tfprotov6.ListResourceRequest) (*tfprotov6.ListResourceServerStream, error) {
	ctx = k.register(ctx)
	return &tfprotov6.ListResourceServerStream{Results: func(yield func(tfprotov6.ListResourceResult) bool) {
		for range 3 {
			if ctx.Err() != nil {
				k.canceledInFlight.Add(1)
			}
			if !yield(tfprotov6.ListResourceResult{}) {
				return
			}
		}
	}}, nil
}

// The guard keeps the framework's kept contexts bounded over many requests,
// never cancels one whose request is running, and never releases while a
// list stream is open.
func TestContextGuardReleasesOnlyFinishedRequests(t *testing.T) {
	t.Parallel()
	k := &contextKeeper{}
	g := guardContexts(k)
	ctx := context.Background()
	storm := func(n int) {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range n {
					if _, err := g.ReadResource(ctx, &tfprotov6.ReadResourceRequest{}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}
	storm(500)
	waitReleases := func(want int64) {
		t.Helper()
		// A bound on a hang, generous for a busy machine, not on speed.
		for deadline := time.Now().Add(5 * time.Minute); g.releases.Load() < want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	waitReleases(4000/releaseEvery - 1)
	if n := k.canceledInFlight.Load(); n > 0 {
		t.Fatalf("%d requests had their context canceled while they ran", n)
	}
	if r := g.releases.Load(); r < 4000/releaseEvery-1 {
		t.Fatalf("%d releases over 4,000 requests, want about one per %d", r, releaseEvery)
	}
	if kept := k.kept(); kept > 2*releaseEvery {
		t.Fatalf("the server still keeps %d request contexts after 4,000 requests", kept)
	}

	// An open list stream holds the releases off; reading it to the end
	// lets them run again.
	stream, err := g.ListResource(ctx, &tfprotov6.ListResourceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	before := g.releases.Load()
	storm(2 * releaseEvery / 8)
	time.Sleep(20 * time.Millisecond)
	if g.releases.Load() != before {
		t.Fatal("the guard released the framework's contexts while a list stream was open")
	}
	n := 0
	for range stream.Results {
		n++
	}
	if n != 3 || g.streams.Load() != 0 {
		t.Fatalf("the stream gave %d results and left %d streams open", n, g.streams.Load())
	}
	storm(2 * releaseEvery / 8)
	waitReleases(before + 1)
	if g.releases.Load() == before {
		t.Fatal("no release after the list stream closed")
	}
	if n := k.canceledInFlight.Load(); n > 0 {
		t.Fatalf("%d requests or streams had their context canceled while they ran", n)
	}
}

// The served provider still offers its list resources through the guard
// (terraform-plugin-go finds them by type assertion).
func TestServerKeepsListResources(t *testing.T) {
	t.Parallel()
	srv, err := NewServer("test")()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.(tfprotov6.ListResourceServer); !ok {
		t.Fatal("the guarded server is not a ListResourceServer")
	}
	schema, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil || len(schema.ListResourceSchemas) != 7 {
		t.Fatalf("list resource schemas through the guard: %d, %v", len(schema.ListResourceSchemas), err)
	}
}

// The provider's process collects garbage at gcPercent, unless the user set
// GOGC, which it then leaves to the runtime.
func TestProcessDefaultsSetTheCollectorsTarget(t *testing.T) {
	for _, v := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"} {
		t.Setenv(v, "WARN") // set: quietSDKLogs leaves them, and they are restored
	}
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })

	t.Setenv("GOGC", "") // restored after the test
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	ProcessDefaults()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("without GOGC the process collects at %d, want %d", got, gcPercent)
	}

	t.Setenv("GOGC", "150")
	ProcessDefaults()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set the process changed the collector's target to %d", got)
	}
}
