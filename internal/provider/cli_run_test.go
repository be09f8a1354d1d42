package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIsDestroyCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args string
		want bool
	}{
		{"destroy -auto-approve", true},
		{"-chdir=infra destroy", true},
		{"apply -destroy", true},
		{"plan -destroy -out=x", true},
		{"apply -auto-approve -destroy=true", true},
		{"apply", false},
		{"apply tfplan", false},
		{"plan -out=destroy", false},
		{"plan -var=mode=destroy", false},
		{"-chdir=destroy plan", false},
		{"", false},
	} {
		if got := isDestroyCommand(strings.Fields(tc.args)); got != tc.want {
			t.Errorf("isDestroyCommand(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// detectRun reads the CLI's command line and start time; a parent that is
// not a Terraform or OpenTofu CLI (a test harness serving the provider in
// process) gives nothing.
func TestDetectRun(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	write := func(pid, cmdline, stat string) {
		t.Helper()
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{"cmdline": cmdline, "stat": stat} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	stat := func(comm string) string {
		return "41 (" + comm + ") S 1 41 41 0 -1 4194560 100 0 0 0 1 1 0 0 20 0 12 0 987654 1000000 100 18446744073709551615\n"
	}
	write("41", "/usr/local/bin/terraform\x00destroy\x00-auto-approve\x00", stat("terra form)"))
	write("42", "/usr/bin/tofu\x00apply\x00tfplan\x00", stat("tofu"))
	write("43", "/usr/local/go/bin/go\x00test\x00./...\x00", stat("go"))
	if r := detectRun(42, proc); r.destroy || !r.applies {
		t.Errorf("tofu apply tfplan: %+v, want an apply", r)
	}
	if r := detectRun(41, proc); !r.destroy || !r.applies || !strings.HasSuffix(r.id, "/41/987654") {
		t.Errorf("terraform destroy: %+v", r)
	}
	if r := detectRun(42, proc); r.destroy || r.id == "" {
		t.Errorf("tofu apply of a saved plan: %+v", r)
	}
	if r := detectRun(43, proc); r != (cliRun{}) {
		t.Errorf("a test harness: %+v, want nothing known", r)
	}
	if r := detectRun(44, proc); r != (cliRun{}) {
		t.Errorf("no such process: %+v", r)
	}
}
