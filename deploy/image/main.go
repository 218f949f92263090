// Command image builds Janus's container image as an OCI tarball without a
// container engine, reproducibly: the same binary gives the same digest.
// It holds what deploy/container/Dockerfile builds: the static binary, a
// non-root user, a data volume, the ports and a health check.
//
//	CGO_ENABLED=0 go build -trimpath -o janus ..   # from deploy/
//	go run ./image --binary janus --out janus-image.tar
//	docker load -i janus-image.tar                # or podman, or skopeo
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/januskv/janus/deploy/image/build"
)

func main() {
	binary := flag.String("binary", "", "the janus binary to put in the image (a static build: CGO_ENABLED=0)")
	out := flag.String("out", "janus-image.tar", "where to write the image tarball")
	tag := flag.String("tag", "janus:latest", "the image's tag in the tarball")
	flag.Parse()
	if *binary == "" {
		fmt.Fprintln(os.Stderr, "image: --binary is required")
		os.Exit(2)
	}
	digest, err := build.Write(*binary, *out, *tag)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s\n", *out, digest)
}
