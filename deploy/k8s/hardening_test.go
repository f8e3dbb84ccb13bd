package k8s

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/bulkreg/bulkreg/deploy/internal/kubecheck"
)

// What makes an overlay unsafe to run as shipped.
// Every overlay: pinned images, GOMEMLIMIT below the memory limit, spread
// over zones and nodes, profiles never on an open port, every workload's
// containers on a read-only root filesystem, as a user and group of 10000
// or above, within CPU, memory and ephemeral-storage limits, and in
// production pulled on every start (kube-score's checks; an
// exception is named in the workload's kube-score/ignore annotation and
// explained beside it, and production has none). Production besides:
// an https public URL, TLS to Kafka and Redis, an Ingress with TLS, a
// NetworkPolicy that denies by default and lets through exactly the flows
// the settings name, and an autoscaler that asks the overlay's Prometheus
// about the overlay's namespace.

// ingressNamespace is where production's ingress controller runs
// (networkpolicy.yaml): sellers' requests come from there.
const ingressNamespace = "ingress-nginx"

// publicIP stands for an address outside the cluster (TEST-NET-3).
var publicIP = net.ParseIP("203.0.113.10")

func hardening(d *kubecheck.Decoded, overlay string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, p := range pods(d) {
		for _, c := range p.spec.Containers {
			id := fmt.Sprintf("%s container %s", p.id, c.Name)
			if problem := imageProblem(c.Image); problem != "" {
				fail("%s: image %q %s: pin a version (or a digest), so what runs is what was tested", id, c.Image, problem)
			}
			bin := bulkregBinary(c)
			if bin == "consumer" || bin == "producer serve" {
				if err := goMemLimit(c); err != nil {
					fail("%s: %v", id, err)
				}
			}
			vars := env(d, c)
			if addr, ok := vars["BULKREG_PPROF_ADDR"]; ok && addr != "" {
				host, _, err := net.SplitHostPort(addr)
				if ip := net.ParseIP(host); err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
					fail("%s: BULKREG_PPROF_ADDR=%s serves heap profiles and traces to whoever reaches the pod: leave it empty, or on loopback for kubectl port-forward", id, addr)
				}
			}
			if overlay == "production" && (bin == "consumer" || bin == "producer serve") {
				for _, name := range []string{"BULKREG_KAFKA_TLS", "BULKREG_REDIS_TLS"} {
					if on, _ := strconv.ParseBool(vars[name]); !on {
						fail("%s: %s is not true: rows, sellers' products and sessions would cross the network in plaintext", id, name)
					}
				}
			}
			if overlay == "production" && bin == "producer serve" {
				u, err := url.Parse(vars["BULKREG_PUBLIC_URL"])
				if err != nil || !strings.EqualFold(u.Scheme, "https") || u.Host == "" {
					fail("%s: BULKREG_PUBLIC_URL %q is not an https URL: sign-in links would point there (the default is http://localhost:8080) and the session cookie would not be Secure", id, vars["BULKREG_PUBLIC_URL"])
				}
			}
		}
	}
	for _, dep := range d.Deployments {
		if strings.HasPrefix(dep.Name, "bulkreg-") {
			errs = append(errs, spread(dep)...)
		}
	}
	errs = append(errs, containment(d, overlay)...)
	if overlay == "production" {
		errs = append(errs, ingressTLS(d)...)
		errs = append(errs, networkPolicies(d)...)
		errs = append(errs, autoscalerSource(d)...)
	}
	return errs
}

// The kube-score checks containment holds, by kube-score's names for them.
const (
	checkReadOnlyRoot = "container-security-context-readonlyrootfilesystem"
	checkUserGroup    = "container-security-context-user-group-id"
	checkResources    = "container-resources"
	checkEphemeral    = "container-ephemeral-storage-request-and-limit"
	checkPullPolicy   = "container-image-pull-policy"
)

// kubeScoreIgnore is the annotation by which a workload tells kube-score
// (and containment) which checks it is an exception to; the manifest says
// why beside it.
const kubeScoreIgnore = "kube-score/ignore"

// minUID is the lowest user and group ID kube-score accepts: below it an ID
// may be a host account's, which a container escape would then act as.
const minUID = 10000

// containment: every container of every workload (Deployment, StatefulSet,
// Job) has a read-only root filesystem, runs as a user and group of
// minUID or above, and has CPU and memory limits and an ephemeral-storage
// request and limit, and in production pulls its image on every start, as
// kube-score wants, unless the workload names the check in its
// kube-score/ignore annotation. The production overlay makes no such
// exception.
func containment(d *kubecheck.Decoded, overlay string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	type workload struct {
		id          string
		annotations map[string]string
		spec        *corev1.PodSpec
	}
	var ws []workload
	for _, x := range d.Deployments {
		ws = append(ws, workload{"Deployment " + x.Name, x.Annotations, &x.Spec.Template.Spec})
	}
	for _, x := range d.StatefulSets {
		ws = append(ws, workload{"StatefulSet " + x.Name, x.Annotations, &x.Spec.Template.Spec})
	}
	for _, x := range d.Jobs {
		ws = append(ws, workload{"Job " + x.Name, x.Annotations, &x.Spec.Template.Spec})
	}
	for _, w := range ws {
		var ignored []string
		if v := w.annotations[kubeScoreIgnore]; v != "" {
			for _, name := range strings.Split(v, ",") {
				ignored = append(ignored, strings.TrimSpace(name))
			}
		}
		if overlay == "production" && len(ignored) > 0 {
			fail("%s: %s %v: production makes no exception to kube-score's checks", w.id, kubeScoreIgnore, ignored)
		}
		podSC := w.spec.SecurityContext
		for _, c := range append(slices.Clone(w.spec.InitContainers), w.spec.Containers...) {
			id := fmt.Sprintf("%s container %s", w.id, c.Name)
			sc := c.SecurityContext
			if !slices.Contains(ignored, checkReadOnlyRoot) && (sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem) {
				fail("%s: readOnlyRootFilesystem must be true (mount an emptyDir where it writes), or the workload names %s in %s and says why", id, checkReadOnlyRoot, kubeScoreIgnore)
			}
			if !slices.Contains(ignored, checkUserGroup) {
				var user, group *int64 // the container's setting wins over the pod's
				if podSC != nil {
					user, group = podSC.RunAsUser, podSC.RunAsGroup
				}
				if sc != nil && sc.RunAsUser != nil {
					user = sc.RunAsUser
				}
				if sc != nil && sc.RunAsGroup != nil {
					group = sc.RunAsGroup
				}
				for _, f := range []struct {
					field string
					v     *int64
				}{{"runAsUser", user}, {"runAsGroup", group}} {
					switch {
					case f.v == nil:
						fail("%s: no %s: it takes the image's, which may be root or a host account's; set %d or above (bulkreg's image: 65532)", id, f.field, minUID)
					case *f.v < minUID:
						fail("%s: %s %d is below %d: a host account's ID, should the container escape; use %d or above (bulkreg's image: 65532)", id, f.field, *f.v, minUID, minUID)
					}
				}
			}
			if !slices.Contains(ignored, checkResources) && (c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero()) {
				fail("%s: no CPU or no memory limit: one busy or leaking container could starve its node's others", id)
			}
			if !slices.Contains(ignored, checkEphemeral) && (c.Resources.Requests.StorageEphemeral().IsZero() || c.Resources.Limits.StorageEphemeral().IsZero()) {
				fail("%s: no ephemeral-storage request or limit: its logs and writable layer could fill the node's disk", id)
			}
			if overlay == "production" && !slices.Contains(ignored, checkPullPolicy) && c.ImagePullPolicy != corev1.PullAlways {
				policy := string(c.ImagePullPolicy)
				if policy == "" {
					policy = "unset (IfNotPresent for a tag)"
				}
				fail("%s: imagePullPolicy %s, want Always: a pod could start from an image left on the node that its pull secret no longer reaches", id, policy)
			}
		}
	}
	return errs
}

// imageProblem says what is wrong with an image reference's version, or "".
func imageProblem(ref string) string {
	if strings.Contains(ref, "@sha256:") {
		return ""
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	switch {
	case !ok || tag == "":
		return "has no tag (it means :latest)"
	case tag == "latest":
		return "is :latest"
	}
	return ""
}

var goMemLimitValue = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`)

// goMemLimit: the Go runtime's soft limit is set, and between 80 % and 95 %
// of the container's memory limit. At 100 % (resourceFieldRef limits.memory,
// or the same figure written out) the runtime collects hard only when the
// kernel is about to kill the pod, since the limit also counts memory the
// heap does not.
func goMemLimit(c corev1.Container) error {
	limit := c.Resources.Limits.Memory().Value()
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		var v float64
		switch {
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			r := e.ValueFrom.ResourceFieldRef
			if r.Resource != "limits.memory" {
				return fmt.Errorf("GOMEMLIMIT reads %s, want a figure below limits.memory", r.Resource)
			}
			if d := r.Divisor.Value(); d > 1 {
				return fmt.Errorf("GOMEMLIMIT from limits.memory with divisor %s is a count of %s, which Go reads as bytes", r.Divisor.String(), r.Divisor.String())
			}
			v = float64(limit)
		default:
			m := goMemLimitValue.FindStringSubmatch(e.Value)
			if m == nil {
				return fmt.Errorf("GOMEMLIMIT %q is not a size Go reads (digits and B, KiB, MiB, GiB or TiB)", e.Value)
			}
			n, _ := strconv.ParseFloat(m[1], 64)
			v = n * map[string]float64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
		}
		if limit == 0 {
			return fmt.Errorf("GOMEMLIMIT is set but the container has no memory limit")
		}
		if ratio := v / float64(limit); ratio < 0.80 || ratio > 0.95 {
			return fmt.Errorf("GOMEMLIMIT is %.0f %% of the memory limit %s, want 80 to 95 %% (about 90 %%): at 100 %% the runtime collects hard only as the kernel kills the pod, far below it wastes the limit", 100*ratio, c.Resources.Limits.Memory().String())
		}
		return nil
	}
	return fmt.Errorf("no GOMEMLIMIT: set it to about 90 %% of the memory limit, so the Go runtime collects before the kernel kills the pod")
}

// spread: a bulkreg Deployment spreads its pods over zones and over nodes,
// each constraint selecting its own pods.
func spread(dep *appsv1.Deployment) []error {
	var errs []error
	for _, key := range []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"} {
		ok := slices.ContainsFunc(dep.Spec.Template.Spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
			if c.TopologyKey != key || c.LabelSelector == nil {
				return false
			}
			s, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			return err == nil && !s.Empty() && s.Matches(labels.Set(dep.Spec.Template.Labels))
		})
		if !ok {
			errs = append(errs, fmt.Errorf("Deployment %s: no topologySpreadConstraint on %s selecting its pods: losing one %s could take every replica", dep.Name, key, map[string]string{"topology.kubernetes.io/zone": "zone", "kubernetes.io/hostname": "node"}[key]))
		}
	}
	return errs
}

// ingressTLS: sellers reach the upload service through an Ingress with TLS
// for the host of BULKREG_PUBLIC_URL.
func ingressTLS(d *kubecheck.Decoded) []error {
	var publicHost string
	for _, p := range pods(d) {
		for _, c := range p.spec.Containers {
			if bulkregBinary(c) == "producer serve" {
				if u, err := url.Parse(env(d, c)["BULKREG_PUBLIC_URL"]); err == nil {
					publicHost = u.Hostname()
				}
			}
		}
	}
	var hosts []string
	for _, ing := range d.Ingresses {
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil || !slices.ContainsFunc(r.HTTP.Paths, func(p networkingv1.HTTPIngressPath) bool {
				return p.Backend.Service != nil && p.Backend.Service.Name == "bulkreg-producer"
			}) {
				continue
			}
			covered := slices.ContainsFunc(ing.Spec.TLS, func(t networkingv1.IngressTLS) bool {
				return t.SecretName != "" && slices.Contains(t.Hosts, r.Host)
			})
			if !covered {
				return []error{fmt.Errorf("Ingress %s: host %q reaches the upload service without TLS: add it to spec.tls with a secretName", ing.Name, r.Host)}
			}
			hosts = append(hosts, r.Host)
		}
	}
	switch {
	case len(hosts) == 0:
		return []error{fmt.Errorf("production has no Ingress with TLS to the Service bulkreg-producer: sellers could not reach the upload service, or only in plaintext")}
	case publicHost != "" && !slices.Contains(hosts, publicHost):
		return []error{fmt.Errorf("BULKREG_PUBLIC_URL's host %q is not a host of the upload service's Ingress %v: sign-in links would lead elsewhere", publicHost, hosts)}
	}
	return nil
}

// peerOf is the other end of a connection to addr (host:port) made from a
// pod in namespace: a Service of this render, one in another namespace
// (<name>.<namespace>.svc…, pods whose labels are unknown here), or an
// address outside the cluster.
func peerOf(d *kubecheck.Decoded, namespace, addr string) (kubecheck.Endpoint, kubecheck.Port, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return kubecheck.Endpoint{}, kubecheck.Port{}, err
	}
	n, err := strconv.Atoi(portText)
	if err != nil {
		return kubecheck.Endpoint{}, kubecheck.Port{}, err
	}
	port := kubecheck.Port{Number: int32(n)}
	parts := strings.Split(host, ".")
	if i := slices.Index(parts, "svc"); i >= 2 {
		return kubecheck.Endpoint{Namespace: parts[i-1]}, port, nil
	}
	if len(parts) == 1 {
		for _, s := range d.Services {
			if s.Name == host {
				return kubecheck.Endpoint{Namespace: namespace, Labels: s.Spec.Selector}, port, nil
			}
		}
		return kubecheck.Endpoint{Namespace: namespace}, port, nil
	}
	return kubecheck.Endpoint{IP: publicIP}, port, nil
}

// networkPolicies: the namespace denies by default, and every flow a
// bulkreg pod needs is let through: DNS, the Kafka brokers and Redis its
// settings name, the registration API (consumers), and each port it
// declares from where it is reached (Prometheus, the ingress controller).
func networkPolicies(d *kubecheck.Decoded) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	prometheusNS := ""
	for _, cm := range d.ConfigMaps {
		if cm.Name == "bulkreg-autoscaling" {
			if u, err := url.Parse(cm.Data["PROMETHEUS_ADDRESS"]); err == nil {
				if p, _, err := peerOf(d, "", u.Host); err == nil {
					prometheusNS = p.Namespace
				}
			}
		}
	}
	type workload struct {
		id        string
		namespace string
		labels    map[string]string
		spec      *corev1.PodSpec
	}
	var ws []workload
	for _, x := range d.Deployments {
		ws = append(ws, workload{"Deployment " + x.Name, x.Namespace, x.Spec.Template.Labels, &x.Spec.Template.Spec})
	}
	for _, x := range d.Jobs {
		ws = append(ws, workload{"Job " + x.Name, x.Namespace, x.Spec.Template.Labels, &x.Spec.Template.Spec})
	}
	namespaces := map[string]bool{}
	for _, w := range ws {
		namespaces[w.namespace] = true
	}
	for ns := range namespaces {
		if !d.DeniesByDefault(ns) {
			fail("namespace %q: no NetworkPolicy denies ingress and egress by default (podSelector {}, policyTypes Ingress and Egress): every pod reaches, and is reached from, anything", ns)
		}
	}
	dns := kubecheck.Endpoint{Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}}
	for _, w := range ws {
		self := kubecheck.Endpoint{Namespace: w.namespace, Labels: w.labels}
		for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
			if !d.Allows(networkingv1.PolicyTypeEgress, self, dns, kubecheck.Port{Number: 53, Protocol: proto}) {
				fail("%s: egress to the cluster's DNS (kube-system, k8s-app=kube-dns, %s 53) is not allowed: it could resolve no name", w.id, proto)
			}
		}
		var needs []string // "what: host:port"
		for _, c := range w.spec.Containers {
			vars := env(d, c)
			bin := bulkregBinary(c)
			switch {
			case bin == "consumer" || bin == "producer serve":
				for _, a := range strings.Split(vars["BULKREG_KAFKA_BROKERS"], ",") {
					needs = append(needs, "Kafka broker "+a)
				}
				for _, a := range strings.Split(vars["BULKREG_REDIS_ADDRS"], ",") {
					needs = append(needs, "Redis "+a)
				}
			case c.Name == "create-topics":
				for _, a := range strings.Split(vars["BOOTSTRAP"], ",") {
					needs = append(needs, "Kafka broker "+a)
				}
			}
			if bin == "consumer" {
				if u, err := url.Parse(vars["BULKREG_REGISTRY_URL"]); err == nil {
					host := u.Host
					if u.Port() == "" {
						host = net.JoinHostPort(u.Hostname(), map[string]string{"https": "443", "http": "80"}[u.Scheme])
					}
					needs = append(needs, "the registration API "+host)
				}
			}
			for _, port := range c.Ports {
				from := kubecheck.Endpoint{Namespace: ingressNamespace}
				what := "the ingress controller (namespace " + ingressNamespace + ")"
				if port.Name == "metrics" || port.Name == "admin" {
					from, what = kubecheck.Endpoint{Namespace: prometheusNS}, "Prometheus (namespace "+prometheusNS+")"
				}
				if !d.Allows(networkingv1.PolicyTypeIngress, self, from, kubecheck.Port{Number: port.ContainerPort, Name: port.Name, Protocol: port.Protocol}) {
					fail("%s: ingress from %s to port %s (%d) is not allowed", w.id, what, port.Name, port.ContainerPort)
				}
			}
		}
		for _, need := range needs {
			i := strings.LastIndex(need, " ")
			what, addr := need[:i], need[i+1:]
			peer, port, err := peerOf(d, w.namespace, addr)
			if err != nil {
				fail("%s: %s: %v", w.id, what, err)
				continue
			}
			if !d.Allows(networkingv1.PolicyTypeEgress, self, peer, port) {
				fail("%s: egress to %s (%s) is not allowed by the NetworkPolicies", w.id, what, addr)
			}
		}
	}
	return errs
}

// autoscalerSource: the ScaledObject asks the Prometheus the overlay names
// (ConfigMap bulkreg-autoscaling) about the overlay's namespace; a value
// the component left as its placeholder, or written into it by hand, is
// refused.
func autoscalerSource(d *kubecheck.Decoded) []error {
	var errs []error
	want := ""
	for _, cm := range d.ConfigMaps {
		if cm.Name == "bulkreg-autoscaling" {
			want = cm.Data["PROMETHEUS_ADDRESS"]
		}
	}
	for _, so := range d.ScaledObjects {
		for i, tr := range so.Spec.Triggers {
			if tr.Type != "prometheus" {
				continue
			}
			addr := tr.Metadata["serverAddress"]
			if u, err := url.Parse(addr); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("%s: triggers[%d].metadata.serverAddress %q is not a Prometheus URL: the overlay fills it from its ConfigMap bulkreg-autoscaling (replacements)", so.ID(), i, addr))
			} else if want == "" || addr != want {
				errs = append(errs, fmt.Errorf("%s: triggers[%d].metadata.serverAddress %q is not the overlay's PROMETHEUS_ADDRESS (ConfigMap bulkreg-autoscaling: %q): one place names the cluster's Prometheus", so.ID(), i, addr, want))
			}
		}
	}
	return errs
}

// TestAutoscalingFollowsTheOverlay: a copy of the production overlay
// deployed to another namespace, with another Prometheus, scales on its own
// consumers as that Prometheus sees them, with no edit to the component
// (the ScaledObject's query and address come from the overlay, not from
// values written into the component).
func TestAutoscalingFollowsTheOverlay(t *testing.T) {
	root := t.TempDir()
	copyTree(t, ".", root)
	path := filepath.Join(root, "overlays/production/kustomization.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for old, new := range map[string]string{
		"namespace: bulkreg\n": "namespace: bulkreg-eu\n",
		"PROMETHEUS_ADDRESS=http://prometheus-operated.monitoring.svc:9090": "PROMETHEUS_ADDRESS=http://thanos-query.observability.svc:9090",
	} {
		if !strings.Contains(s, old) {
			t.Fatalf("the production overlay no longer contains %q: update the test", old)
		}
		s = strings.Replace(s, old, new, 1)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := kubecheck.Render(filepath.Join(root, "overlays/production"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := kubecheck.Validate(objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.ScaledObjects) != 1 {
		t.Fatalf("%d ScaledObjects, want 1", len(d.ScaledObjects))
	}
	so := d.ScaledObjects[0]
	md := so.Spec.Triggers[0].Metadata
	if want := `sum(bulkreg_consumer_sendable_rows{namespace="bulkreg-eu"})`; md["query"] != want {
		t.Errorf("query %q, want %q", md["query"], want)
	}
	if want := "http://thanos-query.observability.svc:9090"; md["serverAddress"] != want {
		t.Errorf("serverAddress %q, want %q", md["serverAddress"], want)
	}
	if so.Namespace != "bulkreg-eu" {
		t.Errorf("the ScaledObject is in %q, want bulkreg-eu", so.Namespace)
	}
}
