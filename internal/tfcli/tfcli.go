// Package tfcli is what the acceptance and e2e tests share about the
// Terraform CLI they run under: version gates whose skips are never silent.
package tfcli

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// EnvSkipLog names a file that every version skip is appended to, one line
// each; scripts/test.sh sets it and prints the file after the run, so that a
// test skipped because the CLI lacks a feature is always reported.
const EnvSkipLog = "IPAM_SKIP_LOG"

var skipLogMu sync.Mutex

// SkipBelow is tfversion.SkipBelow(minimum), with the skip reported: in the
// test's log and in the file named by IPAM_SKIP_LOG.
func SkipBelow(t *testing.T, minimum *version.Version) tfversion.TerraformVersionCheck {
	return noted{t: t, inner: tfversion.SkipBelow(minimum)}
}

type noted struct {
	t     *testing.T
	inner tfversion.TerraformVersionCheck
}

func (n noted) CheckTerraformVersion(ctx context.Context, req tfversion.CheckTerraformVersionRequest, resp *tfversion.CheckTerraformVersionResponse) {
	n.inner.CheckTerraformVersion(ctx, req, resp)
	if resp.Skip != "" {
		NoteSkip(n.t, resp.Skip)
	}
}

// NoteSkip records why t is skipped (the caller then skips it).
func NoteSkip(t *testing.T, why string) {
	t.Helper()
	t.Log("skipped: " + why)
	path := os.Getenv(EnvSkipLog)
	if path == "" {
		return
	}
	skipLogMu.Lock()
	defer skipLogMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Errorf("cannot note the skip in %s: %v", path, err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s (%s): %s\n", t.Name(), os.Getenv("TF_ACC_TERRAFORM_PATH"), why)
}
