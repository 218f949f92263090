package build

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImageTarball builds the server, builds the image around it twice,
// and checks the tarball as a container engine would load it: one layer
// holding the binary, a non-root user that owns the data volume, the
// ports, the entrypoint and a health check that the binary itself answers.
// Two builds of one binary give one digest.
func TestImageTarball(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "janus")
	// A plain build shares the build cache with make test; the static
	// build an image needs (CGO_ENABLED=0 -trimpath) is make image's.
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "..") // the repository root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build janus: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "image.tar")
	digest, err := Write(bin, out, "janus:test")
	if err != nil {
		t.Fatal(err)
	}
	again, err := Write(bin, filepath.Join(dir, "again.tar"), "janus:test")
	if err != nil {
		t.Fatal(err)
	}
	if digest != again {
		t.Errorf("two builds of one binary: %s and %s", digest, again)
	}

	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want non-root 65532:65532", c.User)
	}
	if _, ok := c.Volumes[DataDir]; !ok {
		t.Errorf("no volume at %s: %v", DataDir, c.Volumes)
	}
	for _, p := range Ports {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed", p)
		}
	}
	if len(c.Entrypoint) == 0 || c.Entrypoint[0] != BinaryPath || !slices.Contains(c.Entrypoint, "--data-dir="+DataDir) {
		t.Errorf("entrypoint %v", c.Entrypoint)
	}
	if c.Healthcheck == nil || !slices.Equal(c.Healthcheck.Test[1:3], []string{BinaryPath, "probe"}) {
		t.Errorf("health check %+v", c.Healthcheck)
	}

	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
	}
	want, _ := os.Stat(bin)
	if h := files[BinaryPath[1:]]; h == nil || h.Size != want.Size() || h.Mode&0o111 == 0 {
		t.Errorf("binary in the layer: %+v", h)
	}
	if h := files[DataDir[1:]+"/"]; h == nil || h.Uid != UID {
		t.Errorf("data dir in the layer must belong to the image's user: %+v", h)
	}
	if files["etc/passwd"] == nil {
		t.Error("no /etc/passwd: the user has no name")
	}

	// The health check's command works: the binary answers probe.
	if out, err := exec.Command(bin, "probe").CombinedOutput(); err == nil {
		t.Errorf("probe without a URL succeeded: %s", out)
	}
}
