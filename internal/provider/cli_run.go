package provider

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// cliRun is what the provider knows of the Terraform (or OpenTofu) command
// that started its process. Terraform starts a provider process for each of
// its walks (a plan, a destroy's preliminary plan, an apply) and tells none
// of them the command, so the provider reads its parent's command line
// where the system shows it (Linux's /proc). Where it cannot (another
// system, or a provider served in-process by a test harness, whose parent
// is not the CLI) both fields are empty and nothing depends on them.
type cliRun struct {
	// id names the command: the host, the CLI's process id and its start
	// time (so a reused process id is another run). Plans of one run share
	// what a lost hold told them (ipam.Config.PlanRun).
	id string
	// destroy: the command destroys (terraform destroy, plan -destroy,
	// apply -destroy); its preliminary plan of the configuration takes no
	// plan-time holds.
	destroy bool
	// applies: the command applies (apply, destroy), after a plan of its
	// own or a saved one that reached the database: a first contact that
	// finds nothing listening is a restart far more often than a wrong
	// host, and is waited for as one (Configure).
	applies bool
}

var (
	runOnce sync.Once
	run     cliRun
)

// currentRun reads the parent's command line once per process.
func currentRun() cliRun {
	runOnce.Do(func() { run = detectRun(os.Getppid(), "/proc") })
	return run
}

// detectRun reads process ppid's command line and start time under proc.
func detectRun(ppid int, proc string) cliRun {
	raw, err := os.ReadFile(filepath.Join(proc, fmt.Sprint(ppid), "cmdline"))
	if err != nil || len(raw) == 0 {
		return cliRun{}
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	name := filepath.Base(args[0])
	if !strings.Contains(name, "terraform") && !strings.Contains(name, "tofu") {
		return cliRun{}
	}
	stat, err := os.ReadFile(filepath.Join(proc, fmt.Sprint(ppid), "stat"))
	if err != nil {
		return cliRun{}
	}
	// Field 22 (start time) counts from the end of the command name, which
	// may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return cliRun{}
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return cliRun{}
	}
	host, _ := os.Hostname()
	cmd, _ := commandOf(args[1:])
	return cliRun{id: fmt.Sprintf("%s/%d/%s", host, ppid, fields[19]), destroy: isDestroyCommand(args[1:]),
		applies: cmd == "apply" || cmd == "destroy"}
}

// commandOf is the CLI's command (after the global options such as
// -chdir=DIR) and the arguments after it; "" when there is none.
func commandOf(args []string) (string, []string) {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a, args[i+1:]
		}
	}
	return "", nil
}

// isDestroyCommand tells whether CLI arguments (after the program) destroy:
// the destroy command, or plan or apply with -destroy. Global options such
// as -chdir=DIR come before the command.
func isDestroyCommand(args []string) bool {
	cmd, rest := commandOf(args)
	switch cmd {
	case "destroy":
		return true
	case "plan", "apply":
		for _, a := range rest {
			switch a {
			case "-destroy", "--destroy", "-destroy=true", "--destroy=true":
				return true
			case "--":
				return false
			}
		}
	}
	return false
}
