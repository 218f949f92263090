package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// decodeManifests splits a multi-document YAML file and decodes each
// document strictly into the API type its kind names: an unknown field
// (a typo) fails, as kubectl apply --validate=strict would.
func decodeManifests(t *testing.T, path string) (svcs []corev1.Service, sts []appsv1.StatefulSet, pdbs []policyv1.PodDisruptionBudget) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		strict := func(into any) {
			if err := yaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("%s %s: %v", meta.APIVersion, meta.Kind, err)
			}
		}
		switch meta.APIVersion + "/" + meta.Kind {
		case "v1/Service":
			var s corev1.Service
			strict(&s)
			svcs = append(svcs, s)
		case "apps/v1/StatefulSet":
			var s appsv1.StatefulSet
			strict(&s)
			sts = append(sts, s)
		case "policy/v1/PodDisruptionBudget":
			var p policyv1.PodDisruptionBudget
			strict(&p)
			pdbs = append(pdbs, p)
		default:
			t.Fatalf("unexpected kind %s %s", meta.APIVersion, meta.Kind)
		}
	}
	return svcs, sts, pdbs
}

func TestKubernetesManifests(t *testing.T) {
	svcs, sts, pdbs := decodeManifests(t, "kubernetes/janus.yaml")
	if len(sts) != 1 || len(pdbs) != 1 || len(svcs) != 2 {
		t.Fatalf("%d StatefulSets, %d PDBs, %d Services; want 1, 1, 2", len(sts), len(pdbs), len(svcs))
	}
	ss := sts[0]
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", ss.Spec.Replicas)
	}
	var headless *corev1.Service
	for i := range svcs {
		if svcs[i].Spec.ClusterIP == corev1.ClusterIPNone {
			headless = &svcs[i]
		}
	}
	if headless == nil || headless.Name != ss.Spec.ServiceName || !headless.Spec.PublishNotReadyAddresses {
		t.Fatalf("the StatefulSet's serviceName %q must be a headless Service that publishes not-ready addresses", ss.Spec.ServiceName)
	}
	for _, s := range svcs {
		if !selects(s.Spec.Selector, ss.Spec.Template.Labels) {
			t.Errorf("Service %s selects %v, which misses the pods %v", s.Name, s.Spec.Selector, ss.Spec.Template.Labels)
		}
	}
	if !selects(pdbs[0].Spec.Selector.MatchLabels, ss.Spec.Template.Labels) ||
		pdbs[0].Spec.MaxUnavailable == nil || *pdbs[0].Spec.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("the PodDisruptionBudget must select the pods and allow one down: %+v", pdbs[0].Spec)
	}
	if len(ss.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("want one volume claim template")
	}

	c := ss.Spec.Template.Spec.Containers[0]
	args := c.Args
	flag := func(name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		return ""
	}
	if !slices.Contains(args, "--id-from-hostname") {
		t.Error("members must take their IDs from their pod names")
	}
	// The peers are the pods' stable DNS names under the headless
	// Service, member i+1 on pod i, one per replica.
	peers := strings.Split(flag("peers"), ",")
	if len(peers) != int(*ss.Spec.Replicas) {
		t.Fatalf("--peers names %d members for %d replicas", len(peers), *ss.Spec.Replicas)
	}
	for i, p := range peers {
		want := strings.Join([]string{strconv.Itoa(i + 1), "=", ss.Name, "-", strconv.Itoa(i), ".", headless.Name, ":2380"}, "")
		if p != want {
			t.Errorf("peer %d is %q, want %q", i, p, want)
		}
	}
	if flag("data-dir") != c.VolumeMounts[0].MountPath || c.VolumeMounts[0].Name != ss.Spec.VolumeClaimTemplates[0].Name {
		t.Errorf("the data dir %q must be the persistent volume's mount", flag("data-dir"))
	}
	for _, probe := range []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/livez"}} {
		if probe.p == nil || probe.p.HTTPGet == nil || probe.p.HTTPGet.Path != probe.path || probe.p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe must GET %s on the http port", probe.name, probe.path)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, want := range map[string]int32{"etcd": 2379, "peer": 2380, "zookeeper": 2181, "http": 8080} {
		if ports[name] != want {
			t.Errorf("container port %s is %d, want %d", name, ports[name], want)
		}
	}
	sc := ss.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pods must run as non-root")
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
