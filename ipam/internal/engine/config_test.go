package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// Open and New take one options type, Config. New uses the pool it is
// given, so it refuses Config's connection fields, naming the one set, and
// takes every other field as Open does (here the actor and the origin that
// every allocation records).
func TestNewTakesOpensConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	for field, cfg := range map[string]engine.Config{
		"database_url":    {DatabaseURL: "postgres://elsewhere/db"},
		"max_connections": {MaxConnections: 8},
		"connect_timeout": {ConnectTimeout: time.Second},
	} {
		var ie *engine.InvalidError
		if _, err := engine.New(db, cfg); !errors.As(err, &ie) || ie.Field != field {
			t.Errorf("New with %s set: %v; want invalid_input naming %s", field, err, field)
		}
	}
	client, err := engine.New(db, engine.Config{Actor: "scheduler", Origin: "/work/sched", LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mkCluster(t, client, "c1", "2001:db8::/48", "", "")
	a, err := client.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: node("n1")})
	if err != nil {
		t.Fatal(err)
	}
	if a.Actor != "scheduler" || a.Origin != "/work/sched" {
		t.Errorf("New's client allocated with actor %q and origin %q, want scheduler and /work/sched", a.Actor, a.Origin)
	}
}
