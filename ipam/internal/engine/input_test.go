package engine_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// Bad input names the field of the request the caller filled in (Go's
// names, not the provider's attributes), says what would be valid, and
// writes nothing.
func TestBadInputNamesTheRequestField(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, "")
	ctx := context.Background()
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"empty instance", func() error {
			_, err := s.client.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", OrgID: "acme", EnvID: "prod"})
			return err
		}, "InstanceRequest.InstanceID: must not be empty"},
		{"empty cluster", func() error {
			_, err := s.client.AllocateInstance(ctx, nil, engine.InstanceRequest{InstanceID: "i-0", OrgID: "acme", EnvID: "prod"})
			return err
		}, "InstanceRequest.ClusterID: must not be empty"},
		{"env IPv4 without its pool", func() error {
			_, err := s.client.AllocateEnvIPv4(ctx, nil, engine.EnvIPv4Request{ClusterID: "c1", OrgID: "acme", EnvID: "prod"})
			return err
		}, "EnvIPv4Request.Pool: must be set: an owner of kind env_ipv4 draws its address from the pool named here"},
		{"bad org", func() error {
			_, err := s.client.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i-1", OrgID: "no spaces", EnvID: "prod"})
			return err
		}, "InstanceRequest.OrgID"},
		{"bad cluster", func() error {
			_, err := s.client.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: "Bad Cluster", NodeID: "n1"})
			return err
		}, "NodeRequest.ClusterID"},
		{"empty node", func() error {
			_, err := s.client.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: "c1"})
			return err
		}, "NodeRequest.NodeID: must not be empty"},
		{"address outside the cluster", func() error {
			_, err := s.client.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i-2", OrgID: "acme", EnvID: "prod",
				Address: netip.MustParseAddr("2001:db8:99::1")})
			return err
		}, "InstanceRequest.Address"},
		{"empty env", func() error {
			_, err := s.client.AllocateEnvIPv4(ctx, nil, engine.EnvIPv4Request{ClusterID: "c1", Pool: "v4", OrgID: "acme"})
			return err
		}, "EnvIPv4Request.EnvID"},
		{"env IPv4 without its org", func() error {
			_, err := s.client.AllocateEnvIPv4(ctx, nil, engine.EnvIPv4Request{ClusterID: "c1", Pool: "v4", EnvID: "prod"})
			return err
		}, "EnvIPv4Request.OrgID: must be set"},
		{"instance without its org", func() error {
			_, err := s.client.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i-3", EnvID: "prod"})
			return err
		}, "InstanceRequest.OrgID: must be set"},
		{"instance without its env", func() error {
			_, err := s.client.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i-3", OrgID: "acme"})
			return err
		}, "InstanceRequest.EnvID: must be set"},
	}
	// Sequential, not parallel: the row count below must follow them
	// (parallel subtests would run after the rest of the test).
	for _, tc := range cases {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %v, want ErrInvalid naming %s", tc.name, err, tc.want)
			}
			for _, attr := range []string{"owner_id", "instance_id", "org_id", "cluster_id", "node_id", "env_id"} {
				if strings.Contains(err.Error(), attr+":") {
					t.Errorf("%s: %v names the provider's attribute %s", tc.name, err, attr)
				}
			}
		})
	}
	if n := s.count(`SELECT count(*) FROM ipam_allocations`); n != 0 {
		t.Errorf("bad input wrote %d allocations", n)
	}
}

// A request's cluster that does not exist matches ErrNotFound (and
// ErrInvalid, naming the field) whichever call names it: an allocation as a
// release.
func TestAMissingClusterIsNotFoundForEveryCall(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, "")
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"AllocateInstance": func() error {
			_, err := s.client.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "nope", InstanceID: "i-1", OrgID: "acme", EnvID: "prod"})
			return err
		},
		"AllocateNode": func() error {
			_, err := s.client.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: "nope", NodeID: "n1"})
			return err
		},
		"ReleaseInstance": func() error { return s.client.ReleaseInstance(ctx, nil, "nope", "i-1") },
		"ReleaseNode":     func() error { return s.client.ReleaseNode(ctx, nil, "nope", "n1") },
	} {
		err := call()
		if !errors.Is(err, engine.ErrNotFound) || !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), `cluster "nope" does not exist`) {
			t.Errorf("%s in a cluster that does not exist: %v, want ErrInvalid and ErrNotFound", name, err)
		}
	}
}
