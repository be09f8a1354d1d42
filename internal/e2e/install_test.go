package e2e

// The install route of docs/guides/installing.md, run as the guide shows it:
// make install-mirror into a mirror directory, the CLI configuration it
// prints, an unmodified `terraform init` (no dev_overrides) of a root module
// that uses the IPAM provider and a second provider, the lock file, an apply;
// the same mirror served over HTTPS as a network mirror, `providers lock` for
// two platforms, an upgrade to a newer build and a tampered package. The
// guide's blocks are marked not-run with a key in brackets ([install]); this
// test takes each block by its key, so that the guide shows what runs here.
//
// No provider is downloaded: the second provider (example/echo,
// internal/e2e/echoprovider) is built here and served by a filesystem mirror
// of its own, which the test adds to the printed configuration, and excludes
// from `direct` (which would ask its registry).

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/internal/tfcli"
)

// EnvE2ETofu names a tofu binary: TestInstallFromMirror then runs the install
// with OpenTofu as well.
const EnvE2ETofu = "IPAM_E2E_TOFU"

// EnvE2ERelease set to 1 runs TestReleaseLayout (make release: goreleaser,
// built on first use, and every platform; minutes).
const EnvE2ERelease = "IPAM_E2E_RELEASE"

const installGuide = "docs/guides/installing.md"

// The guide's placeholders, which the test replaces with its own.
const (
	guideMirrorPath = `"/home/you/.terraform.d/plugins"`
	guideMirrorURL  = "https://terraform-mirror.example.com/"
)

// guideBlock is the body of the block of the install guide whose not-run
// reason ends in [key].
func guideBlock(t *testing.T, key string) string {
	t.Helper()
	return pageBlock(t, installGuide, key)
}

// pageBlock is the body of the block of a page whose not-run reason ends in
// [key]: a block that a test runs as the page shows it.
func pageBlock(t *testing.T, page, key string) string {
	t.Helper()
	var found []string
	for _, f := range parseFences(t, repoRoot(t), page) {
		if strings.HasSuffix(f.marks["not-run"], "["+key+"]") {
			found = append(found, f.body)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d blocks marked [%s], want 1", page, len(found), key)
	}
	return found[0]
}

// replaced replaces each old with its new in s (pairs old, new, ...); every
// old must occur.
func replaced(t *testing.T, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("%q is not in the guide's block any more:\n%s", pairs[i], s)
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}

// clisUnderTest are the CLIs the install tests run with: the suite's
// terraform, and OpenTofu when EnvE2ETofu names it.
func clisUnderTest(t *testing.T) []cli {
	t.Helper()
	clis := []cli{cliOf(t, terraformBin)}
	if p := os.Getenv(EnvE2ETofu); p != "" {
		clis = append(clis, cliOf(t, p))
	}
	return clis
}

// cli is the Terraform or OpenTofu binary an install runs with.
type cli struct {
	name string // terraform or tofu: the command the guide's blocks run
	bin  string
	host string // the registry that source = "overlayipam/ipam" means to it
}

func cliOf(t *testing.T, bin string) cli {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	if bytes.Contains(out, []byte("OpenTofu v")) {
		return cli{name: "tofu", bin: bin, host: "registry.opentofu.org"}
	}
	return cli{name: "terraform", bin: bin, host: "registry.terraform.io"}
}

// testContext ends a little before the test binary's deadline (go test
// -timeout), so that a hung command is killed, with its children, before the
// binary panics; it bounds no command by the speed of the machine.
func testContext(t *testing.T) (context.Context, context.CancelFunc) {
	if d, ok := t.Deadline(); ok {
		return context.WithDeadline(context.Background(), d.Add(-time.Minute))
	}
	return context.WithCancel(context.Background())
}

// runScript runs a shell script (bash -e) in dir with env, returning its
// combined output.
func runScript(t *testing.T, dir string, env []string, script string) (string, error) {
	t.Helper()
	ctx, cancel := testContext(t)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// makeEnv is the environment of a make command run from the clone: the
// caller's, without the variables the install reads unless given.
func makeEnv(vars ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MIRROR_DIR", "DIST", "VERSION", "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
		default:
			env = append(env, kv)
		}
	}
	return append(env, vars...)
}

// installMirror runs a make install-mirror block of the guide in the clone and
// returns the CLI configuration it printed (stdout) and its log (stderr).
func installMirror(t *testing.T, block string, vars ...string) (config, log string) {
	t.Helper()
	return installMirrorIn(t, repoRoot(t), block, vars...)
}

// installMirrorIn is installMirror in another copy of the repository.
func installMirrorIn(t *testing.T, root, block string, vars ...string) (config, log string) {
	t.Helper()
	ctx, cancel := testContext(t)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", block)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = makeEnv(vars...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s (%s): %v\n%s%s", strings.TrimSpace(block), strings.Join(vars, " "), err, stdout.String(), stderr.String())
	}
	i := strings.Index(stdout.String(), "provider_installation {")
	if i < 0 {
		t.Fatalf("%s printed no CLI configuration:\n%s%s", strings.TrimSpace(block), stdout.String(), stderr.String())
	}
	return stdout.String()[i:], stderr.String()
}

// mirrorZips lists the provider's zips for one host of a mirror, by version.
func mirrorZips(t *testing.T, mirror, host string) map[string][]string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(mirror, host, "overlayipam", "ipam", "terraform-provider-ipam_*.zip"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	re := regexp.MustCompile(`^terraform-provider-ipam_([0-9][^_]*)_([a-z0-9]+_[a-z0-9]+)\.zip$`)
	for _, z := range all {
		m := re.FindStringSubmatch(filepath.Base(z))
		if m == nil {
			t.Fatalf("%s: not a provider zip name", z)
		}
		out[m[1]] = append(out[m[1]], m[2])
	}
	return out
}

// h1 is Terraform's h1: checksum of a provider zip (dirhash.Hash1 of its
// files), the one a lock file records for a package from a mirror.
func h1(t *testing.T, zipPath string) string {
	t.Helper()
	r, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	files := slices.Clone(r.File)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	sum := sha256.New()
	for _, f := range files {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		hf := sha256.New()
		if _, err := io.Copy(hf, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		fmt.Fprintf(sum, "%x  %s\n", hf.Sum(nil), f.Name)
	}
	return "h1:" + base64.StdEncoding.EncodeToString(sum.Sum(nil))
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

// writeZip writes a zip of files (name -> content), executables as a release's.
func writeZip(t *testing.T, p string, files map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range sortedKeys(files) {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lockEntry reads a provider's version and checksums from a lock file.
func lockEntry(t *testing.T, lockFile, addr string) (version string, hashes []string) {
	t.Helper()
	text := mustRead(t, lockFile)
	i := strings.Index(text, "provider "+strconv.Quote(addr)+" {")
	if i < 0 {
		t.Fatalf("%s has no entry for %s:\n%s", lockFile, addr, text)
	}
	block := text[i:]
	if j := strings.Index(block, "\n}"); j >= 0 {
		block = block[:j]
	}
	if m := regexp.MustCompile(`version\s*=\s*"([^"]+)"`).FindStringSubmatch(block); m != nil {
		version = m[1]
	}
	for _, m := range regexp.MustCompile(`"((?:h1|zh):[^"]+)"`).FindAllStringSubmatch(block, -1) {
		hashes = append(hashes, m[1])
	}
	return version, hashes
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		copyFile(t, p, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// goBuild builds a package of the module for a platform, as the release does.
func goBuild(t *testing.T, out, pkg, goos, goarch, version string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", out, pkg)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s for %s_%s: %v\n%s", pkg, goos, goarch, err, out)
	}
}

// echoMirror builds the second provider into a filesystem mirror of its own
// (the unpacked layout), under both registries' addresses.
func echoMirror(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(t.TempDir(), "terraform-provider-echo_v1.0.0")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/e2e/echoprovider")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/e2e/echoprovider: %v\n%s", err, out)
	}
	for _, host := range []string{"registry.terraform.io", "registry.opentofu.org"} {
		p := filepath.Join(dir, host, "example", "echo", "1.0.0", runtime.GOOS+"_"+runtime.GOARCH, filepath.Base(bin))
		copyFile(t, bin, p)
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var echoAddrs = []string{"registry.terraform.io/example/echo", "registry.opentofu.org/example/echo"}

// withEcho adds the second provider's mirror to a CLI configuration of the
// guide, before its direct block, and excludes it from direct.
func withEcho(t *testing.T, config, echo string) string {
	t.Helper()
	quoted := strconv.Quote(echoAddrs[0]) + ", " + strconv.Quote(echoAddrs[1])
	return replaced(t, config,
		"  direct {\n", fmt.Sprintf("  filesystem_mirror {\n    path    = %s\n    include = [%s]\n  }\n  direct {\n", strconv.Quote(echo), quoted),
		"exclude = [", "exclude = ["+quoted+", ")
}

// rootModule uses the IPAM provider and the second provider: an echo of a
// node address.
const rootModule = `terraform {
  required_providers {
    ipam = { source = "overlayipam/ipam" }
    echo = { source = "example/echo" }
  }
}

provider "ipam" {}

resource "ipam_node_address" "node" {
  cluster_id = "c1"
  node_id    = "node-1"
}

resource "echo_text" "node" {
  text = ipam_node_address.node.address
}

output "echoed" {
  value = echo_text.node.id
}
`

// The install of the guide: make install-mirror prints the guide's CLI
// configuration; with it an unmodified init of a root module using the IPAM
// provider and another one installs both, writes the IPAM provider's checksum
// to the lock file, and applies; the same release laid out by make
// install-mirror DIST=... and served over HTTPS as a network mirror installs
// under the same lock file, providers lock records a second platform, an init
// -upgrade moves to a newer build and a package with other contents is
// refused. With Terraform, and with OpenTofu when IPAM_E2E_TOFU names it.
func TestInstallFromMirror(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()

	// make install-mirror, as the guide shows it, into a mirror of the test.
	mirror := filepath.Join(tmp, "mirror")
	printed, log := installMirror(t, guideBlock(t, "install"), "MIRROR_DIR="+mirror)
	if want := replaced(t, guideBlock(t, "local-config"), guideMirrorPath, strconv.Quote(mirror)); printed != want {
		t.Fatalf("make install-mirror printed\n%s\nthe guide shows (with the mirror's path)\n%s", printed, want)
	}
	platform := runtime.GOOS + "_" + runtime.GOARCH
	var version string
	for _, host := range []string{"registry.terraform.io", "registry.opentofu.org"} {
		zips := mirrorZips(t, mirror, host)
		if len(zips) != 1 {
			t.Fatalf("%s: %v in the mirror, want one version\n%s", host, zips, log)
		}
		for v, platforms := range zips {
			version = v
			if !slices.Equal(platforms, []string{platform}) {
				t.Fatalf("%s %s: platforms %v, want %s", host, v, platforms, platform)
			}
		}
		checkNetworkDocs(t, filepath.Join(mirror, host, "overlayipam", "ipam"), map[string][]string{version: {platform}})
	}
	if !regexp.MustCompile(`^0\.0\.\d{14}$|^\d+\.\d+\.\d+$`).MatchString(version) {
		t.Fatalf("the build is version %q: not a tag's X.Y.Z nor 0.0.YYYYMMDDhhmmss", version)
	}
	zipName := fmt.Sprintf("terraform-provider-ipam_%s_%s.zip", version, platform)
	localZip := filepath.Join(mirror, "registry.terraform.io", "overlayipam", "ipam", zipName)

	// A team's mirror: make release's files (here the zip built above and one
	// built for a second platform, with SHA256SUMS and the manifest) laid out
	// by make install-mirror DIST=..., served over HTTPS.
	second := "darwin_arm64"
	if platform == second {
		second = "linux_amd64"
	}
	dist := filepath.Join(tmp, "dist")
	copyFile(t, localZip, filepath.Join(dist, zipName))
	goos, goarch, _ := strings.Cut(second, "_")
	bin := filepath.Join(t.TempDir(), "terraform-provider-ipam_v"+version)
	goBuild(t, bin, ".", goos, goarch, version)
	bytesOf := mustReadBytes(t, bin)
	secondZip := fmt.Sprintf("terraform-provider-ipam_%s_%s.zip", version, second)
	writeZip(t, filepath.Join(dist, secondZip), map[string][]byte{filepath.Base(bin): bytesOf})
	manifest := fmt.Sprintf("terraform-provider-ipam_%s_manifest.json", version)
	copyFile(t, filepath.Join(repoRoot(t), "terraform-registry-manifest.json"), filepath.Join(dist, manifest))
	var sums strings.Builder
	for _, f := range []string{secondZip, zipName, manifest} {
		fmt.Fprintf(&sums, "%s  %s\n", sha256File(t, filepath.Join(dist, f)), f)
	}
	if err := os.WriteFile(filepath.Join(dist, fmt.Sprintf("terraform-provider-ipam_%s_SHA256SUMS", version)), []byte(sums.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	site := filepath.Join(tmp, "site")
	installMirror(t, replaced(t, guideBlock(t, "install-dist"), "DIST=dist", "DIST="+dist, "MIRROR_DIR=site", "MIRROR_DIR="+site))
	for _, host := range []string{"registry.terraform.io", "registry.opentofu.org"} {
		checkNetworkDocs(t, filepath.Join(site, host, "overlayipam", "ipam"), map[string][]string{version: {platform, second}})
	}
	srv := httptest.NewTLSServer(http.FileServer(http.Dir(site)))
	t.Cleanup(srv.Close)
	cert := filepath.Join(tmp, "mirror-ca.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	network := replaced(t, guideBlock(t, "network-config"), guideMirrorURL, srv.URL+"/")

	echo := echoMirror(t)
	zips := map[string]string{platform: localZip, second: filepath.Join(dist, secondZip)}
	clis := clisUnderTest(t)
	covered := map[string]bool{}
	for _, c := range clis {
		covered[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			in := &install{t: t, cli: c, echo: echo, version: version, platform: platform, second: second, zips: zips,
				mirror: mirror, localConfig: printed, networkConfig: network, mirrorURL: srv.URL + "/", cert: cert}
			in.run()
		})
	}
	if !covered["tofu"] {
		t.Run("tofu", func(t *testing.T) {
			why := "the install with OpenTofu runs when " + EnvE2ETofu + " names a tofu binary (or the suite runs under tofu)"
			tfcli.NoteSkip(t, why)
			t.Skip(why)
		})
	}
}

func mustReadBytes(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkNetworkDocs checks a mirror directory's index.json and VERSION.json
// (the provider network mirror protocol) against the zips it holds.
func checkNetworkDocs(t *testing.T, dir string, want map[string][]string) {
	t.Helper()
	var index struct {
		Versions map[string]struct{} `json:"versions"`
	}
	if err := json.Unmarshal(mustReadBytes(t, filepath.Join(dir, "index.json")), &index); err != nil {
		t.Fatalf("%s/index.json: %v", dir, err)
	}
	if got := sortedKeys(index.Versions); !slices.Equal(got, sortedKeys(want)) {
		t.Errorf("%s/index.json lists %v, want %v", dir, got, sortedKeys(want))
	}
	for v, platforms := range want {
		var doc struct {
			Archives map[string]struct {
				URL    string   `json:"url"`
				Hashes []string `json:"hashes"`
			} `json:"archives"`
		}
		if err := json.Unmarshal(mustReadBytes(t, filepath.Join(dir, v+".json")), &doc); err != nil {
			t.Fatalf("%s/%s.json: %v", dir, v, err)
		}
		if got, w := sortedKeys(doc.Archives), slices.Sorted(slices.Values(platforms)); !slices.Equal(got, w) {
			t.Errorf("%s/%s.json has %v, want %v", dir, v, got, w)
		}
		for p, a := range doc.Archives {
			if name := fmt.Sprintf("terraform-provider-ipam_%s_%s.zip", v, p); a.URL != name {
				t.Errorf("%s/%s.json: %s's url is %q, want %q", dir, v, p, a.URL, name)
			} else if zh := "zh:" + sha256File(t, filepath.Join(dir, name)); !slices.Equal(a.Hashes, []string{zh}) {
				t.Errorf("%s/%s.json: %s's hashes are %v, want [%s]", dir, v, p, a.Hashes, zh)
			}
		}
	}
}

// install is one CLI's run of the guide.
type install struct {
	t                          *testing.T
	cli                        cli
	echo                       string // the second provider's mirror
	version, platform, second  string
	zips                       map[string]string // platform -> the release's zip
	mirror                     string            // the local mirror make install-mirror made
	localConfig, networkConfig string            // the guide's CLI configurations, with the test's mirror
	mirrorURL, cert            string            // the network mirror and its certificate
	url                        string            // the database
	env                        []string
}

func (in *install) addr() string { return in.cli.host + "/overlayipam/ipam" }

// config writes a CLI configuration (with the second provider) to a file.
func (in *install) config(text string) string {
	in.t.Helper()
	p := filepath.Join(in.t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(p, []byte(withEcho(in.t, text, in.echo)), 0o600); err != nil {
		in.t.Fatal(err)
	}
	return p
}

// sh runs a script of the guide in dir, with the CLI configuration file.
func (in *install) sh(dir, config, script string) (string, error) {
	in.t.Helper()
	return runScript(in.t, dir, append(slices.Clone(in.env), "TF_CLI_CONFIG_FILE="+config), script)
}

func (in *install) must(dir, config, script string) string {
	in.t.Helper()
	out, err := in.sh(dir, config, script)
	if err != nil {
		in.t.Fatalf("%s: %v\n%s", strings.TrimSpace(script), err, out)
	}
	return out
}

// workdir is a root module's directory with the given files of another.
func (in *install) workdir(from string, files ...string) string {
	in.t.Helper()
	dir := in.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(rootModule), 0o600); err != nil {
		in.t.Fatal(err)
	}
	for _, f := range files {
		copyFile(in.t, filepath.Join(from, f), filepath.Join(dir, f))
	}
	return dir
}

// checkLock checks the lock file of dir: the IPAM provider at version with
// exactly the h1: checksums of the zips given (what Terraform computes for a
// package from a mirror), and no zh: checksum but of those zips (OpenTofu
// records the ones a network mirror reports); and the second provider.
func (in *install) checkLock(dir string, version string, zips ...string) {
	in.t.Helper()
	lock := filepath.Join(dir, ".terraform.lock.hcl")
	v, got := lockEntry(in.t, lock, in.addr())
	var want, gotH1 []string
	zh := map[string]bool{}
	for _, z := range zips {
		want = append(want, h1(in.t, z))
		zh["zh:"+sha256File(in.t, z)] = true
	}
	ok := v == version
	for _, h := range got {
		if strings.HasPrefix(h, "h1:") {
			gotH1 = append(gotH1, h)
		} else if !zh[h] {
			ok = false
		}
	}
	if !ok || !sameSet(gotH1, want) {
		in.t.Fatalf("%s: %s is locked at %s with %v; want %s with %v (the h1: checksums of %v; zh: only of those)\n%s",
			lock, in.addr(), v, got, version, want, zips, mustRead(in.t, lock))
	}
	for _, a := range echoAddrs {
		if strings.HasPrefix(a, in.cli.host) {
			if v, h := lockEntry(in.t, lock, a); v != "1.0.0" || len(h) == 0 {
				in.t.Fatalf("%s: the second provider %s is locked at %q with %v", lock, a, v, h)
			}
		}
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// emptyPlan checks that a plan of dir finds nothing to do.
func (in *install) emptyPlan(dir, config string) {
	in.t.Helper()
	out, err := in.sh(dir, config, in.cli.name+" plan -input=false -no-color -detailed-exitcode")
	if err != nil {
		in.t.Fatalf("%s: the plan is not empty (or failed): %v\n%s", dir, err, out)
	}
}

// prepare makes the database and the reader's environment.
func (in *install) prepare() {
	t := in.t
	in.url = setup(t)
	tools := t.TempDir()
	if err := os.Symlink(in.cli.bin, filepath.Join(tools, in.cli.name)); err != nil {
		t.Fatal(err)
	}
	// The reader's environment: no TF_* settings but the CLI configuration
	// file, a home of its own (no ~/.terraformrc, no plugin cache), the
	// network mirror's certificate trusted.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TF_") || strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "SSL_CERT_") ||
			k == "HOME" || k == "PATH" || k == "IPAM_DATABASE_URL" || k == "XDG_CONFIG_HOME" || k == "XDG_DATA_HOME" {
			continue
		}
		in.env = append(in.env, kv)
	}
	in.env = append(in.env, "HOME="+t.TempDir(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"),
		"IPAM_DATABASE_URL="+in.url, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_CLI_ARGS_init=-no-color")
	if in.cert != "" {
		in.env = append(in.env, "SSL_CERT_FILE="+in.cert)
	}
}

// initAndApply runs the guide's init in a new root module with the CLI
// configuration file, checks the lock file (the IPAM provider's checksum is
// that of zip) and applies: the second provider echoes the IPAM's address.
func (in *install) initAndApply(config, zip string) string {
	t := in.t
	w := in.workdir("")
	out := in.must(w, config, guideBlock(t, "init-"+in.cli.name))
	if want := "Installed overlayipam/ipam v" + in.version; !strings.Contains(out, want) {
		t.Fatalf("init did not say %q:\n%s", want, out)
	}
	in.checkLock(w, in.version, zip)
	in.must(w, config, in.cli.name+" apply -input=false -auto-approve -no-color")
	echoed := strings.TrimSpace(in.must(w, config, in.cli.name+" output -raw echoed"))
	if _, ok := activeAddresses(t, in.url)[echoed]; !ok {
		t.Fatalf("the second provider echoed %q, which is not an active address: %v", echoed, activeAddresses(t, in.url))
	}
	in.emptyPlan(w, config)
	return w
}

func (in *install) run() {
	t := in.t
	in.prepare()

	// 1. The local mirror, with the configuration make install-mirror printed.
	local := in.config(in.localConfig)
	w := in.initAndApply(local, in.zips[in.platform])

	// 2. The team's network mirror: the same files from another source keep
	// the lock file; providers lock adds the second platform.
	network := in.config(in.networkConfig)
	w2 := in.workdir(w, ".terraform.lock.hcl", "terraform.tfstate")
	out := in.must(w2, network, guideBlock(t, "init-"+in.cli.name))
	if want := "Installed overlayipam/ipam v" + in.version; !strings.Contains(out, want) {
		t.Fatalf("init from the network mirror did not say %q:\n%s", want, out)
	}
	in.checkLock(w2, in.version, in.zips[in.platform])
	in.emptyPlan(w2, network)
	in.must(w2, network, replaced(t, guideBlock(t, "lock-"+in.cli.name), guideMirrorURL, in.mirrorURL))
	in.checkLock(w2, in.version, in.zips[in.platform], in.zips[in.second])
	in.must(w2, network, in.cli.name+" init -input=false")

	// 3. A newer build in the mirror: init keeps the locked version, init
	// -upgrade moves to the newer one.
	m2 := filepath.Join(t.TempDir(), "mirror")
	copyTree(t, in.mirror, m2)
	next := nextVersion(t, in.version)
	printed, _ := installMirror(t, guideBlock(t, "install"), "MIRROR_DIR="+m2, "VERSION="+next)
	upgraded := in.config(printed)
	in.must(w, upgraded, in.cli.name+" init -input=false")
	in.checkLock(w, in.version, in.zips[in.platform])
	out = in.must(w, upgraded, in.cli.name+" init -input=false -upgrade")
	if want := "Installed overlayipam/ipam v" + next; !strings.Contains(out, want) {
		t.Fatalf("init -upgrade did not say %q:\n%s", want, out)
	}
	nextZip := filepath.Join(m2, in.cli.host, "overlayipam", "ipam", fmt.Sprintf("terraform-provider-ipam_%s_%s.zip", next, in.platform))
	in.checkLock(w, next, nextZip)
	in.emptyPlan(w, upgraded)

	// 4. A package of the locked version with other contents is refused.
	for _, host := range []string{"registry.terraform.io", "registry.opentofu.org"} {
		z := filepath.Join(m2, host, "overlayipam", "ipam", fmt.Sprintf("terraform-provider-ipam_%s_%s.zip", in.version, in.platform))
		writeZip(t, z, map[string][]byte{"terraform-provider-ipam_v" + in.version: []byte("#!/bin/sh\nexit 1\n")})
	}
	w3 := in.workdir(w2, ".terraform.lock.hcl")
	out, err := in.sh(w3, upgraded, in.cli.name+" init -input=false")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(out, "checksums previously recorded in the dependency lock file") {
		t.Fatalf("init of a package with other contents than the lock file's: %v\n%s", err, out)
	}
}

// nextVersion is a version after v (its patch plus one).
func nextVersion(t *testing.T, v string) string {
	t.Helper()
	i := strings.LastIndex(v, ".")
	n, err := strconv.ParseUint(v[i+1:], 10, 64)
	if err != nil {
		t.Fatalf("version %q: %v", v, err)
	}
	return v[:i+1] + strconv.FormatUint(n+1, 10)
}

// The release of the guide, when IPAM_E2E_RELEASE=1 (goreleaser, built on
// first use, and sixteen cross builds take minutes; make test does not): make
// release in a copy of the working tree, committed, builds a snapshot of its
// own version with the registry's files for every platform (zips, SHA256SUMS,
// manifest); make install-mirror DIST=dist lays them out; terraform init
// installs this platform's zip from it and applies. Then, with the copy
// tagged v0.1.0, make release builds the release 0.1.0.
func TestReleaseLayout(t *testing.T) {
	t.Parallel()
	if os.Getenv(EnvE2ERelease) != "1" {
		why := "make release (goreleaser, every platform) runs when " + EnvE2ERelease + "=1"
		tfcli.NoteSkip(t, why)
		t.Skip(why)
	}
	src := copyWorkingTree(t)
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
		cmd.Dir = src
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "the working tree")
	// A clone's remote, which goreleaser reads (a release, not a snapshot,
	// fails without one); nothing is fetched from it.
	git("remote", "add", "origin", "https://github.com/overlayipam/terraform-provider-ipam.git")
	want := "0.0." + func() string {
		cmd := exec.Command("git", "log", "-1", "--format=%cd", "--date=format-local:%Y%m%d%H%M%S")
		cmd.Dir, cmd.Env = src, append(os.Environ(), "TZ=UTC")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}()

	release := func(version string) map[string]string {
		t.Helper()
		if out, err := runScript(t, src, makeEnv(), guideBlock(t, "release")); err != nil {
			t.Fatalf("make release: %v\n%s", err, out)
		}
		return checkDist(t, filepath.Join(src, "dist"), version)
	}
	zips := release(want)

	site := filepath.Join(t.TempDir(), "site")
	printed, _ := installMirrorIn(t, src, replaced(t, guideBlock(t, "install-dist"), "MIRROR_DIR=site", "MIRROR_DIR="+site))
	for _, host := range []string{"registry.terraform.io", "registry.opentofu.org"} {
		checkNetworkDocs(t, filepath.Join(site, host, "overlayipam", "ipam"), map[string][]string{want: sortedKeys(zips)})
	}
	platform := runtime.GOOS + "_" + runtime.GOARCH
	in := &install{t: t, cli: cliOf(t, terraformBin), echo: echoMirror(t), version: want}
	in.prepare()
	in.initAndApply(in.config(printed), zips[platform])

	git("tag", "v0.1.0")
	release("0.1.0")
}

// checkDist checks make release's dist/ for a version: a zip for every
// platform of SHA256SUMS, at least those most teams run on, each with the
// provider's binary named as the registries expect; SHA256SUMS listing them
// and the manifest; the manifest. It returns the zips by platform.
func checkDist(t *testing.T, dist, version string) map[string]string {
	t.Helper()
	name := "terraform-provider-ipam_" + version
	sums := map[string]string{}
	zips := map[string]string{}
	zipRE := regexp.MustCompile("^" + regexp.QuoteMeta(name) + `_([a-z0-9]+_[a-z0-9]+)\.zip$`)
	for _, line := range strings.Split(strings.TrimSpace(mustRead(t, filepath.Join(dist, name+"_SHA256SUMS"))), "\n") {
		sum, file, _ := strings.Cut(line, "  ")
		sums[file] = sum
		if m := zipRE.FindStringSubmatch(file); m != nil {
			zips[m[1]] = filepath.Join(dist, file)
		}
	}
	for _, p := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64", "windows_amd64"} {
		if zips[p] == "" {
			t.Errorf("%s_SHA256SUMS lists no zip for %s: %v", name, p, sortedKeys(zips))
		}
	}
	for _, p := range sortedKeys(zips) {
		f := filepath.Base(zips[p])
		if got := sha256File(t, zips[p]); sums[f] != got {
			t.Errorf("%s: SHA256SUMS says %q, the file is %s", f, sums[f], got)
		}
		r, err := zip.OpenReader(zips[p])
		if err != nil {
			t.Fatal(err)
		}
		bin := "terraform-provider-ipam_v" + version
		if strings.HasPrefix(p, "windows") {
			bin += ".exe"
		}
		if !slices.ContainsFunc(r.File, func(f *zip.File) bool { return f.Name == bin }) {
			t.Errorf("%s holds no %s", f, bin)
		}
		r.Close()
	}
	manifest := filepath.Join(dist, name+"_manifest.json")
	if got, want := mustRead(t, manifest), mustRead(t, filepath.Join(repoRoot(t), "terraform-registry-manifest.json")); got != want {
		t.Errorf("%s is not terraform-registry-manifest.json:\n%s", manifest, got)
	}
	if got := sha256File(t, manifest); sums[filepath.Base(manifest)] != got {
		t.Errorf("%s: SHA256SUMS says %q, the file is %s", manifest, sums[filepath.Base(manifest)], got)
	}
	return zips
}

// copyWorkingTree copies the repository's files (tracked and untracked, but
// not ignored ones) to a new directory, with no git history.
func copyWorkingTree(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		info, err := os.Lstat(filepath.Join(root, f))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted, not yet committed
		} else if err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join(root, f), filepath.Join(dst, f))
		if err := os.Chmod(filepath.Join(dst, f), info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// Two clones of one commit, at other paths, build the same provider zip
// byte for byte with make install-mirror (as the guide shows it), one with
// Go's VCS stamping off in GOFLAGS and one with it on (a teammate's go env
// may say either): the lock file one teammate commits holds for the build
// of another, whose init would otherwise refuse the package as not matching
// its checksums.
func TestInstallFromMirrorIsReproducible(t *testing.T) {
	t.Parallel()
	var sums []string
	for _, goflags := range []string{"GOFLAGS=-buildvcs=false", "GOFLAGS=-buildvcs=true"} {
		src := copyWorkingTree(t)
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "one commit"}} {
			cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
			// The same commit time in both: the version and the files' time.
			cmd.Dir, cmd.Env = src, append(os.Environ(), "GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		mirror := filepath.Join(t.TempDir(), "mirror")
		installMirrorIn(t, src, guideBlock(t, "install"), "MIRROR_DIR="+mirror, goflags)
		zips, err := filepath.Glob(filepath.Join(mirror, "registry.terraform.io", "overlayipam", "ipam", "*.zip"))
		if err != nil || len(zips) != 1 || !strings.Contains(filepath.Base(zips[0]), "_0.0.20260102030405_") {
			t.Fatalf("the mirror holds %v (%v), want one zip of version 0.0.20260102030405", zips, err)
		}
		sums = append(sums, filepath.Base(zips[0])+" "+sha256File(t, zips[0]))
	}
	if sums[0] != sums[1] {
		t.Fatalf("two clones of one commit built different zips:\n%s\n%s", sums[0], sums[1])
	}
}

// The Go API guide's way into a scheduler's module before the repository
// is published: its replace and go get, in a new module, with the path of
// this tree for the clone's; a program using the package then builds and
// runs.
func TestGoModuleFromAClone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := append(makeEnv(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	main := `package main

import (
	"fmt"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

func main() { fmt.Println(ipam.CodeExhausted, ipam.DefaultMTU) }
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	block := replaced(t, pageBlock(t, "docs/guides/go-api.md", "go-module"), "=../terraform-provider-ipam", "="+repoRoot(t))
	script := "go mod init example.com/scheduler\n" + block + "go run .\n"
	out, err := runScript(t, dir, env, script)
	if err != nil || !strings.Contains(out, "ipam_exhausted 1420") {
		t.Fatalf("the guide's module setup, then go run: %v\n%s", err, out)
	}
}
