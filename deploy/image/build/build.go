// Package build assembles Janus's container image (see deploy/image).
package build

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image's fixed facts, the same as the Dockerfile's.
const (
	BinaryPath = "/usr/local/bin/janus"
	DataDir    = "/var/lib/janus"
	UID        = 65532
)

// Ports are the ports the image exposes: etcd clients, peers, ZooKeeper
// clients, HTTP.
var Ports = []string{"2379/tcp", "2380/tcp", "2181/tcp", "8080/tcp"}

// Image returns the image holding binary.
func Image(binary string) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs(bin))), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg := &cf.Config
	cfg.User = fmt.Sprintf("%d:%d", UID, UID)
	cfg.WorkingDir = DataDir
	cfg.Entrypoint = []string{BinaryPath, "--data-dir=" + DataDir, "--etcd-listen=0.0.0.0:2379", "--zk-listen=0.0.0.0:2181", "--http-listen=0.0.0.0:8080"}
	cfg.Volumes = map[string]struct{}{DataDir: {}}
	cfg.ExposedPorts = map[string]struct{}{}
	for _, p := range Ports {
		cfg.ExposedPorts[p] = struct{}{}
	}
	cfg.Healthcheck = &v1.HealthConfig{
		Test:     []string{"CMD", BinaryPath, "probe", "http://127.0.0.1:8080/livez"},
		Interval: 10 * time.Second,
		Timeout:  5 * time.Second,
		Retries:  3,
	}
	cfg.Labels = map[string]string{"org.opencontainers.image.title": "janus"}
	return mutate.ConfigFile(img, cf)
}

// Write writes the image holding binary to out, tagged tag, and returns its
// digest.
func Write(binary, out, tag string) (string, error) {
	img, err := Image(binary)
	if err != nil {
		return "", err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return "", fmt.Errorf("tag %q: %w", tag, err)
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return "", fmt.Errorf("write %s: %w", out, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// rootfs is the image's one layer, with fixed times and owners so that the
// same binary always makes the same bytes.
func rootfs(bin []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	dir := func(path string, uid int) {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path + "/", Mode: 0o755, Uid: uid, Gid: uid, ModTime: epoch})
	}
	file := func(path string, mode int64, data []byte) {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data)), ModTime: epoch})
		_, _ = tw.Write(data)
	}
	dir("etc", 0)
	file("etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/:/sbin/nologin\njanus:x:%d:%d:janus:%s:/sbin/nologin\n", UID, UID, DataDir)))
	file("etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\njanus:x:%d:\n", UID)))
	dir("tmp", 0)
	dir("usr", 0)
	dir("usr/local", 0)
	dir("usr/local/bin", 0)
	file(BinaryPath[1:], 0o755, bin)
	dir("var", 0)
	dir("var/lib", 0)
	dir(DataDir[1:], UID)
	_ = tw.Close()
	return buf.Bytes()
}
