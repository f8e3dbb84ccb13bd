// Package k8s holds the Kubernetes manifests (kustomize base, component and
// overlays). Its tests render each overlay as `kubectl apply -k` would and
// check the result offline: strictly against the Kubernetes API types and
// KEDA's CRD (deploy/internal/kubecheck), then against what bulkreg itself needs
// (the settings its binaries read, grace periods above their shutdown
// timeouts, the image's user, the autoscaler's range and the topic's
// partitions).
package k8s

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/bulkreg/bulkreg/deploy/internal/kubecheck"
	"github.com/bulkreg/bulkreg/internal/cli/clitest"
)

// overlays are the directories `kubectl apply -k` is documented for.
var overlays = []string{"base", "overlays/dev", "overlays/production"}

func TestShippedManifests(t *testing.T) {
	readers := settingsReaders(t)
	uid := imageUser(t)
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			if err := check(dir, readers, uid); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBrokenManifestsFail proves the check can fail: each case breaks one
// thing in a copy of deploy/k8s, and the same check that passes the shipped
// files must refuse it with a message naming the problem.
func TestBrokenManifestsFail(t *testing.T) {
	readers := settingsReaders(t)
	uid := imageUser(t)
	cases := []struct {
		name, file, old, new, overlay, want string
	}{
		{"metrics on the consumer's loopback default", "base/kustomization.yaml",
			"      - BULKREG_METRICS_ADDR=:9464\n", "", "base",
			"port 9464 is declared (probes and Prometheus reach it from outside the pod), but consumer listens on 127.0.0.1:9464, loopback only: set BULKREG_METRICS_ADDR=:9464"},
		{"misspelled field of a built-in type", "base/consumer.yaml",
			"containerPort: 9464", "containerPrt: 9464", "base",
			`unknown field "spec.template.spec.containers[0].ports[0].containerPrt"`},
		{"field in the wrong case", "base/producer.yaml",
			"readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", "base",
			`unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`},
		{"missing required field of a built-in type", "base/producer.yaml",
			"          image: bulkreg\n", "", "base",
			"spec.template.spec.containers[0].image: required"},
		{"probe on a port the container does not declare", "base/consumer.yaml",
			"              port: metrics\n            periodSeconds: 2", "              port: metric\n            periodSeconds: 2", "base",
			`startupProbe: port "metric" is not a port the container declares`},
		{"misspelled field of the ScaledObject", "components/autoscaling/scaledobject.yaml",
			"minReplicaCount: 1", "minReplicasCount: 1", "overlays/production",
			"minReplicasCount"},
		{"missing required field of the ScaledObject", "components/autoscaling/scaledobject.yaml",
			"  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: bulkreg-consumer\n", "", "overlays/production",
			"scaleTargetRef"},
		{"misspelled Prometheus trigger setting", "components/autoscaling/scaledobject.yaml",
			"ignoreNullValues:", "ignoreNullValue:", "overlays/production",
			"metadata.ignoreNullValue: not a setting of KEDA's Prometheus scaler"},
		{"misspelled bulkreg setting", "base/kustomization.yaml",
			"BULKREG_REDIS_ADDRS=redis:6379", "BULKREG_REDIS_ADDR=redis:6379", "overlays/dev",
			"BULKREG_REDIS_ADDR is set, but"},
		{"grace period below the consumer's shutdown timeout", "base/consumer.yaml",
			"terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds: 30", "base",
			"terminationGracePeriodSeconds (30 s) must be above"},
		{"a replica count under the autoscaler", "base/consumer.yaml",
			"spec:\n  revisionHistoryLimit: 5", "spec:\n  replicas: 3\n  revisionHistoryLimit: 5", "overlays/production",
			"Deployment bulkreg-consumer sets spec.replicas, which every apply would reset"},
		{"more consumers than partitions", "components/autoscaling/scaledobject.yaml",
			"maxReplicaCount: 12", "maxReplicaCount: 24", "overlays/production",
			"maxReplicaCount (24) must equal the rows topic's partitions (12)"},
		{"scale-down window shorter than the API's window", "components/autoscaling/scaledobject.yaml",
			"stabilizationWindowSeconds: 120", "stabilizationWindowSeconds: 30", "overlays/production",
			"scale-down stabilization window (30 s) must be longer than BULKREG_WINDOW"},
		// What would make the production overlay unsafe as shipped.
		{"GOMEMLIMIT at the whole memory limit", "base/consumer.yaml",
			"              value: 230MiB\n", "              valueFrom:\n                resourceFieldRef:\n                  resource: limits.memory\n", "base",
			"GOMEMLIMIT is 100 % of the memory limit 256Mi"},
		{"no GOMEMLIMIT", "base/producer.yaml",
			"            - name: GOMEMLIMIT\n              value: 460MiB\n", "", "base",
			"container producer: no GOMEMLIMIT"},
		{"spread by hostname only", "base/consumer.yaml",
			"          topologyKey: topology.kubernetes.io/zone", "          topologyKey: kubernetes.io/hostname", "base",
			"Deployment bulkreg-consumer: no topologySpreadConstraint on topology.kubernetes.io/zone"},
		{"the dev overlay's sandbox image without a tag", "overlays/dev/kustomization.yaml",
			"images:\n  - name: bulkreg\n    newName: bulkreg\n    newTag: local\n", "", "overlays/dev",
			`container registry-sandbox: image "bulkreg" has no tag`},
		{"profiles on an open port", "base/kustomization.yaml",
			"      - BULKREG_METRICS_ADDR=:9464\n", "      - BULKREG_METRICS_ADDR=:9464\n      - BULKREG_PPROF_ADDR=:6060\n", "base",
			"BULKREG_PPROF_ADDR=:6060 serves heap profiles and traces to whoever reaches the pod"},
		{"the topics Job on a writable root filesystem", "base/topics.yaml",
			"            readOnlyRootFilesystem: true\n", "", "base",
			"Job bulkreg-topics container create-topics: readOnlyRootFilesystem must be true"},
		{"the topics Job as the Kafka image's user", "base/topics.yaml",
			"        runAsUser: 65532\n        runAsGroup: 65532\n", "        runAsUser: 1000\n        runAsGroup: 1000\n", "base",
			"Job bulkreg-topics container create-topics: runAsUser 1000 is below 10000"},
		{"the topics Job without a group", "base/topics.yaml",
			"        runAsGroup: 65532\n", "", "base",
			"Job bulkreg-topics container create-topics: no runAsGroup"},
		{"the topics Job without a CPU limit", "base/topics.yaml",
			"              cpu: \"1\"\n              memory: 512Mi\n", "              memory: 512Mi\n", "base",
			"Job bulkreg-topics container create-topics: no CPU or no memory limit"},
		{"a StatefulSet without a CPU limit", "overlays/dev/kafka.yaml",
			"              cpu: \"1\"\n              memory: 1Gi\n", "              memory: 1Gi\n", "overlays/dev",
			"StatefulSet kafka container kafka: no CPU or no memory limit"},
		{"an exception without its annotation", "overlays/dev/kafka.yaml",
			"    kube-score/ignore: container-security-context-readonlyrootfilesystem,container-security-context-user-group-id\n", "    kube-score/ignore: container-security-context-readonlyrootfilesystem\n", "overlays/dev",
			"StatefulSet kafka container kafka: runAsUser 1000 is below 10000"},
		{"the topics Job without an ephemeral-storage limit", "base/topics.yaml",
			"              ephemeral-storage: 256Mi\n", "", "base",
			"Job bulkreg-topics container create-topics: no ephemeral-storage request or limit"},
		{"production pulling only images not on the node", "overlays/production/kustomization.yaml",
			"  - target:\n      kind: Job\n    patch: *pullAlways\n", "", "overlays/production",
			"Job bulkreg-topics container create-topics: imagePullPolicy unset (IfNotPresent for a tag), want Always"},
		{"an exception in production", "base/topics.yaml",
			"  name: bulkreg-topics\n", "  name: bulkreg-topics\n  annotations:\n    kube-score/ignore: container-resources\n", "overlays/production",
			"Job bulkreg-topics: kube-score/ignore [container-resources]: production makes no exception"},
		{"sign-in links to an http URL", "overlays/production/kustomization.yaml",
			"BULKREG_PUBLIC_URL=https://uploads.example.com", "BULKREG_PUBLIC_URL=http://uploads.example.com", "overlays/production",
			`BULKREG_PUBLIC_URL "http://uploads.example.com" is not an https URL`},
		{"no public URL (sign-in links to localhost)", "overlays/production/kustomization.yaml",
			"      - BULKREG_PUBLIC_URL=https://uploads.example.com\n", "", "overlays/production",
			`BULKREG_PUBLIC_URL "" is not an https URL`},
		{"Kafka in plaintext", "overlays/production/kustomization.yaml",
			"- BULKREG_KAFKA_TLS=true", "- BULKREG_KAFKA_TLS=false", "overlays/production",
			"container consumer: BULKREG_KAFKA_TLS is not true"},
		{"Redis in plaintext", "overlays/production/kustomization.yaml",
			"      - BULKREG_REDIS_TLS=true\n", "", "overlays/production",
			"container producer: BULKREG_REDIS_TLS is not true"},
		{"no Ingress", "overlays/production/kustomization.yaml",
			"  - ingress.yaml\n", "", "overlays/production",
			"production has no Ingress with TLS to the Service bulkreg-producer"},
		{"an Ingress without TLS", "overlays/production/ingress.yaml",
			"  tls:\n    - hosts:\n        - uploads.example.com\n      secretName: bulkreg-uploads-tls\n", "", "overlays/production",
			`host "uploads.example.com" reaches the upload service without TLS`},
		{"sign-in links to a host the Ingress does not serve", "overlays/production/kustomization.yaml",
			"BULKREG_PUBLIC_URL=https://uploads.example.com", "BULKREG_PUBLIC_URL=https://upload.example.com", "overlays/production",
			`BULKREG_PUBLIC_URL's host "upload.example.com" is not a host of the upload service's Ingress`},
		{"no NetworkPolicy", "overlays/production/kustomization.yaml",
			"  - networkpolicy.yaml\n", "", "overlays/production",
			`namespace "bulkreg": no NetworkPolicy denies ingress and egress by default`},
		{"a default that denies ingress only", "overlays/production/networkpolicy.yaml",
			"  podSelector: {}\n  policyTypes: [Ingress, Egress]\n", "  podSelector: {}\n  policyTypes: [Ingress]\n", "overlays/production",
			`namespace "bulkreg": no NetworkPolicy denies ingress and egress by default`},
		{"consumers cut off from the registration API", "overlays/production/networkpolicy.yaml",
			"        - {protocol: TCP, port: 443}\n", "        - {protocol: TCP, port: 8443}\n", "overlays/production",
			"Deployment bulkreg-consumer: egress to the registration API (registration-api.example.com:443) is not allowed"},
		{"brokers on a port the policies do not open", "overlays/production/kustomization.yaml",
			"kafka-0.kafka-brokers.kafka.svc:9093", "kafka-0.kafka-brokers.kafka.svc:9092", "overlays/production",
			"Deployment bulkreg-producer: egress to Kafka broker (kafka-0.kafka-brokers.kafka.svc:9092) is not allowed"},
		{"no DNS", "overlays/production/networkpolicy.yaml",
			"              k8s-app: kube-dns\n", "              k8s-app: coredns-typo\n", "overlays/production",
			"Job bulkreg-topics: egress to the cluster's DNS"},
		{"Prometheus cannot scrape the consumers", "overlays/production/networkpolicy.yaml",
			"        - {protocol: TCP, port: metrics}\n", "        - {protocol: TCP, port: 9465}\n", "overlays/production",
			"Deployment bulkreg-consumer: ingress from Prometheus (namespace monitoring) to port metrics (9464) is not allowed"},
		{"the Prometheus address left to the component", "overlays/production/kustomization.yaml",
			"          name: bulkreg-consumer\n        fieldPaths:\n          - spec.triggers.[name=sendable-rows].metadata.serverAddress\n", "          name: bulkreg-elsewhere\n        fieldPaths:\n          - spec.triggers.[name=sendable-rows].metadata.serverAddress\n", "overlays/production",
			`metadata.serverAddress "SET-BY-THE-OVERLAY" is not a Prometheus URL`},
		{"no monitoring in production", "overlays/production/kustomization.yaml",
			"  - ../../components/monitoring\n", "", "overlays/production",
			"production: no PodMonitor scrapes Deployment bulkreg-consumer's port metrics"},
		{"a PodMonitor on a port the pods do not declare", "components/monitoring/podmonitor.yaml",
			"    - port: admin\n", "    - port: admn\n", "overlays/production",
			`PodMonitor bulkreg/bulkreg-producer: port "admn" is not a port of Deployment bulkreg-producer's pods`},
		{"targets without bulkreg_component", "components/monitoring/podmonitor.yaml",
			"          targetLabel: bulkreg_component\n", "          targetLabel: component\n", "overlays/production",
			"PodMonitor bulkreg/bulkreg-consumer: podMetricsEndpoints[0] does not copy the pods' app.kubernetes.io/component into bulkreg_component"},
		{"pods without the component label", "base/producer.yaml",
			"        app.kubernetes.io/name: bulkreg-producer\n        app.kubernetes.io/component: upload-service\n", "        app.kubernetes.io/name: bulkreg-producer\n", "overlays/production",
			"Deployment bulkreg-producer's pods have no app.kubernetes.io/component label"},
		{"misspelled field of the PodMonitor", "components/monitoring/podmonitor.yaml",
			"      relabelings:", "      relabellings:", "overlays/production",
			"relabellings"},
		{"misspelled field of the PrometheusRule", "components/monitoring/prometheusrule.yaml",
			"          labels: {severity: page}\n", "          label: {severity: page}\n", "overlays/production",
			"additional properties 'label' not allowed"},
		{"the query's namespace left to the component", "overlays/production/kustomization.yaml",
			"      name: bulkreg-consumer\n      fieldPath: metadata.namespace\n", "      name: bulkreg-consumer\n      fieldPath: metadata.name\n", "overlays/production",
			`does not select this namespace (bulkreg)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, ".", root)
			path := filepath.Join(root, tc.file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.old) {
				t.Fatalf("%s no longer contains %q: update the case", tc.file, tc.old)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(b), tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			err = check(filepath.Join(root, tc.overlay), readers, uid)
			if err == nil {
				t.Fatalf("the check passed %s with %q changed to %q", tc.file, tc.old, tc.new)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the check failed, but not naming %q:\n%v", tc.want, err)
			}
			t.Log(err)
		})
	}
}

// check renders dir, validates it with kubecheck, then applies bulkreg's
// own rules.
func check(dir string, readers map[string][]string, uid int64) error {
	objs, err := kubecheck.Render(dir)
	if err != nil {
		return err
	}
	d, err := kubecheck.Validate(objs)
	if err != nil {
		return err
	}
	return errors.Join(policy(d, filepath.Base(dir), readers, uid)...)
}

// bulkregBinary names the bulkreg program a container runs ("consumer",
// "producer serve", "registry-sandbox"), or "" for another image's.
func bulkregBinary(c corev1.Container) string {
	if len(c.Command) == 0 || !strings.HasPrefix(c.Command[0], "/usr/local/bin/") {
		return ""
	}
	name := strings.TrimPrefix(c.Command[0], "/usr/local/bin/")
	switch {
	case name == "producer" && slices.Equal(c.Command[1:], []string{"serve"}):
		return "producer serve"
	case name == "consumer" || name == "registry-sandbox":
		return name
	}
	return "/usr/local/bin/" + name
}

// env is a container's environment as the kubelet would build it from the
// render: plain values and ConfigMap entries (a Secret's value is unknown
// here: "").
func env(d *kubecheck.Decoded, c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		for _, cm := range d.ConfigMaps {
			if cm.Name == ef.ConfigMapRef.Name {
				for k, v := range cm.Data {
					out[ef.Prefix+k] = v
				}
			}
		}
	}
	for _, e := range c.Env {
		out[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			for _, cm := range d.ConfigMaps {
				if cm.Name == e.ValueFrom.ConfigMapKeyRef.Name {
					out[e.Name] = cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
				}
			}
		}
	}
	return out
}

type pod struct {
	id   string
	spec *corev1.PodSpec
}

func pods(d *kubecheck.Decoded) []pod {
	var out []pod
	for _, x := range d.Deployments {
		out = append(out, pod{"Deployment " + x.Name, &x.Spec.Template.Spec})
	}
	for _, x := range d.StatefulSets {
		out = append(out, pod{"StatefulSet " + x.Name, &x.Spec.Template.Spec})
	}
	for _, x := range d.Jobs {
		out = append(out, pod{"Job " + x.Name, &x.Spec.Template.Spec})
	}
	return out
}

// secretKeys are the keys of the Secret bulkreg-secrets that
// docs/production.md documents; a reference to another key would never resolve.
var secretKeys = []string{"jwt-secret", "jwt-operator-secret", "redis-password", "kafka-password", "registry-auth-header"}

func policy(d *kubecheck.Decoded, overlay string, readers map[string][]string, uid int64) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, p := range pods(d) {
		if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
			fail("%s: automountServiceAccountToken must be false (nothing here talks to the Kubernetes API)", p.id)
		}
		if p.spec.EnableServiceLinks == nil || *p.spec.EnableServiceLinks {
			fail("%s: enableServiceLinks must be false (a Service named bulkreg-… would inject BULKREG_* variables)", p.id)
		}
		podSC := p.spec.SecurityContext
		for _, c := range p.spec.Containers {
			id := fmt.Sprintf("%s container %s", p.id, c.Name)
			sc := c.SecurityContext
			nonRoot := sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot || podSC != nil && podSC.RunAsNonRoot != nil && *podSC.RunAsNonRoot
			if !nonRoot {
				fail("%s: runAsNonRoot must be true", id)
			}
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				fail("%s: allowPrivilegeEscalation must be false", id)
			}
			if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				fail("%s: capabilities must drop ALL", id)
			}
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
				fail("%s: needs a memory request and limit and a CPU request", id)
			}
			for _, e := range c.Env {
				if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
					if r.SecretKeyRef.Name != "bulkreg-secrets" || !slices.Contains(secretKeys, r.SecretKeyRef.Key) {
						fail("%s: env %s reads Secret %s key %s; docs/production.md documents bulkreg-secrets with keys %v", id, e.Name, r.SecretKeyRef.Name, r.SecretKeyRef.Key, secretKeys)
					}
				}
			}
			bin := bulkregBinary(c)
			if bin == "" {
				continue
			}
			errs = append(errs, bulkregContainer(d, p, c, id, bin, readers, uid)...)
		}
	}
	errs = append(errs, disruptionBudgets(d)...)
	errs = append(errs, topics(d, overlay)...)
	errs = append(errs, autoscaling(d, overlay)...)
	errs = append(errs, monitoring(d, overlay)...)
	errs = append(errs, hardening(d, overlay)...)
	return errs
}

// bulkregContainer checks a container that runs one of bulkreg's binaries.
func bulkregContainer(d *kubecheck.Decoded, p pod, c corev1.Container, id, bin string, readers map[string][]string, uid int64) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	sc, podSC := c.SecurityContext, p.spec.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		fail("%s: readOnlyRootFilesystem must be true", id)
	}
	var user *int64 // the container's setting wins over the pod's
	if podSC != nil {
		user = podSC.RunAsUser
	}
	if sc != nil && sc.RunAsUser != nil {
		user = sc.RunAsUser
	}
	if user == nil || *user != uid {
		fail("%s: must run as the image's user %d (Dockerfile USER)", id, uid)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		fail("%s: needs a liveness and a readiness probe", id)
	}
	// Readiness is what the process needs answering (its group, Redis,
	// Kafka); liveness and start-up only whether it runs: a broker that
	// does not answer must take the pod out of service, not restart it
	// (docs/operations.md, "Health endpoints"). The sandbox serves
	// /healthz only.
	for _, pr := range []struct {
		name, want string
		probe      *corev1.Probe
	}{{"readinessProbe", "/readyz", c.ReadinessProbe}, {"livenessProbe", "/livez", c.LivenessProbe}, {"startupProbe", "/livez", c.StartupProbe}} {
		if bin == "registry-sandbox" {
			break
		}
		if pr.probe == nil || pr.probe.HTTPGet == nil || pr.probe.HTTPGet.Path != pr.want {
			fail("%s: the %s must be an httpGet of %s", id, pr.name, pr.want)
		}
	}
	if c.Resources.Limits.Cpu().IsZero() {
		fail("%s: needs a CPU limit", id)
	}
	vars := env(d, c)
	// A declared port is reached from outside the pod (probes, the
	// Service, Prometheus), so whatever listens on it must not be on
	// loopback, where the binaries put their operators' listeners by default.
	for _, port := range c.Ports {
		for name, def := range listenAddrs[bin] {
			addr, set := vars[name]
			if !set {
				addr = def
			}
			host, p, err := net.SplitHostPort(addr)
			if err != nil || p != strconv.Itoa(int(port.ContainerPort)) {
				continue
			}
			if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
				fail("%s: port %d is declared (probes and Prometheus reach it from outside the pod), but %s listens on %s, loopback only: set %s=:%d", id, port.ContainerPort, bin, addr, name, port.ContainerPort)
			}
		}
	}
	for name := range vars {
		if !strings.HasPrefix(name, "BULKREG_") {
			continue
		}
		if slices.Contains(readers[name], bin) {
			continue
		}
		fail("%s: %s is set, but docs/configuration.md lists no setting of that name read by %s (a misspelt name is silently ignored)", id, name, bin)
	}
	// Each binary exits within BULKREG_SHUTDOWN_TIMEOUT of SIGTERM; the
	// kubelet's SIGKILL must come later, after any preStop sleep too.
	if bin == "consumer" || bin == "producer serve" {
		shutdown, err := time.ParseDuration(vars["BULKREG_SHUTDOWN_TIMEOUT"])
		if err != nil {
			fail("%s: BULKREG_SHUTDOWN_TIMEOUT must be set explicitly, to compare with terminationGracePeriodSeconds: %v", id, err)
			return errs
		}
		var preStop time.Duration
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
		grace := 30 * time.Second // the API's default
		if p.spec.TerminationGracePeriodSeconds != nil {
			grace = time.Duration(*p.spec.TerminationGracePeriodSeconds) * time.Second
		}
		if grace <= shutdown+preStop {
			fail("%s: terminationGracePeriodSeconds (%d s) must be above BULKREG_SHUTDOWN_TIMEOUT (%s) plus the preStop sleep (%s)", id, int(grace.Seconds()), shutdown, preStop)
		}
		if bin == "consumer" {
			// The drain (at most the session timeout) must fit in the
			// shutdown timeout, or the consumer refuses to start.
			session, err := time.ParseDuration(vars["BULKREG_SESSION_TIMEOUT"])
			if err != nil {
				session = 10 * time.Second
			}
			if shutdown <= session {
				fail("%s: BULKREG_SHUTDOWN_TIMEOUT (%s) must be above BULKREG_SESSION_TIMEOUT (%s), which bounds the drain", id, shutdown, session)
			}
		}
	}
	return errs
}

// listenAddrs are the listen addresses each binary reads, with their
// defaults (docs/configuration.md's tables).
var listenAddrs = map[string]map[string]string{
	"consumer":         {"BULKREG_METRICS_ADDR": "127.0.0.1:9464"},
	"producer serve":   {"BULKREG_ADDR": ":8080", "BULKREG_ADMIN_ADDR": "127.0.0.1:9465"},
	"registry-sandbox": {"BULKREG_LISTEN": "127.0.0.1:8081"},
}

// disruptionBudgets: every bulkreg Deployment has a PodDisruptionBudget.
func disruptionBudgets(d *kubecheck.Decoded) []error {
	var errs []error
	for _, dep := range d.Deployments {
		if !strings.HasPrefix(dep.Name, "bulkreg-") {
			continue
		}
		covered := slices.ContainsFunc(d.PDBs, func(b *policyv1.PodDisruptionBudget) bool {
			for k, v := range b.Spec.Selector.MatchLabels {
				if dep.Spec.Template.Labels[k] != v {
					return false
				}
			}
			return true
		})
		if !covered {
			errs = append(errs, fmt.Errorf("Deployment %s: no PodDisruptionBudget selects its pods", dep.Name))
		}
	}
	return errs
}

// topicsJob returns the topic Job's settings.
func topicsJob(d *kubecheck.Decoded) (*batchv1.Job, map[string]string) {
	for _, j := range d.Jobs {
		if j.Name == "bulkreg-topics" {
			return j, env(d, j.Spec.Template.Spec.Containers[0])
		}
	}
	return nil, nil
}

func topics(d *kubecheck.Decoded, overlay string) []error {
	var errs []error
	j, vars := topicsJob(d)
	if j == nil {
		return []error{errors.New("no Job bulkreg-topics: the rows topic would not exist")}
	}
	script := strings.Join(j.Spec.Template.Spec.Containers[0].Args, "\n")
	if out, err := exec.Command("bash", "-n", "-c", script).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("Job bulkreg-topics: its script is not valid bash: %v\n%s", err, out))
	}
	for _, k := range []string{"BOOTSTRAP", "TOPIC", "PARTITIONS", "REPLICATION", "MIN_INSYNC"} {
		if vars[k] == "" {
			errs = append(errs, fmt.Errorf("Job bulkreg-topics: %s is empty", k))
		}
	}
	if overlay == "production" {
		if vars["REPLICATION"] != "3" || vars["MIN_INSYNC"] != "2" {
			errs = append(errs, fmt.Errorf("Job bulkreg-topics: production topics need replication 3 and min.insync.replicas 2, got %s and %s", vars["REPLICATION"], vars["MIN_INSYNC"]))
		}
		if n := len(strings.Split(vars["BOOTSTRAP"], ",")); n < 3 {
			errs = append(errs, fmt.Errorf("production names %d Kafka brokers, want 3", n))
		}
	}
	return errs
}

// componentLabel is the pod label the PodMonitors copy into
// bulkreg_component, which deploy/alerts.yml and the dashboard select.
const componentLabel = "app.kubernetes.io/component"

// monitoring checks the PodMonitors (components/monitoring): in production
// every bulkreg Deployment that serves metrics is scraped, each PodMonitor
// selects pods that declare its port, and every target carries
// bulkreg_component from the pods' app.kubernetes.io/component, without
// which the Down alerts would page with every pod up.
func monitoring(d *kubecheck.Decoded, overlay string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	type podMonitor struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port        string `json:"port"`
				Relabelings []struct {
					SourceLabels []string `json:"sourceLabels"`
					TargetLabel  string   `json:"targetLabel"`
					Action       string   `json:"action"`
				} `json:"relabelings"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	scraped := map[string]bool{} // "Deployment/port"
	rules := 0
	for _, o := range d.Objects {
		if o.Kind == "PrometheusRule" {
			rules++
		}
		if o.Kind != "PodMonitor" {
			continue
		}
		var pm podMonitor
		if err := o.Unmarshal(&pm); err != nil {
			errs = append(errs, err)
			continue
		}
		for i, ep := range pm.Spec.Endpoints {
			copies := false
			for _, r := range ep.Relabelings {
				copies = copies || (r.Action == "" || r.Action == "replace") && r.TargetLabel == "bulkreg_component" &&
					slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_pod_label_app_kubernetes_io_component"})
			}
			if !copies {
				fail("%s: podMetricsEndpoints[%d] does not copy the pods' %s into bulkreg_component, which the alerts select", o.ID(), i, componentLabel)
			}
			selected := 0
			for _, dep := range d.Deployments {
				tmpl := dep.Spec.Template
				if dep.Namespace != o.Namespace || len(pm.Spec.Selector.MatchLabels) == 0 || !labelsMatch(pm.Spec.Selector.MatchLabels, tmpl.Labels) {
					continue
				}
				selected++
				declared := false
				for _, c := range tmpl.Spec.Containers {
					for _, p := range c.Ports {
						declared = declared || p.Name == ep.Port
					}
				}
				if !declared {
					fail("%s: port %q is not a port of Deployment %s's pods", o.ID(), ep.Port, dep.Name)
				}
				if tmpl.Labels[componentLabel] == "" {
					fail("%s: Deployment %s's pods have no %s label, so their targets get no bulkreg_component", o.ID(), dep.Name, componentLabel)
				}
				scraped[dep.Name+"/"+ep.Port] = true
			}
			if selected == 0 {
				fail("%s: selects no Deployment's pods", o.ID())
			}
		}
	}
	if overlay != "production" {
		return errs
	}
	for _, dep := range d.Deployments {
		for _, c := range dep.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				if (p.Name == "metrics" || p.Name == "admin") && !scraped[dep.Name+"/"+p.Name] {
					fail("production: no PodMonitor scrapes Deployment %s's port %s (add ../../components/monitoring)", dep.Name, p.Name)
				}
			}
		}
	}
	if rules != 1 {
		fail("production has %d PrometheusRules, want bulkreg's alerts (components/monitoring)", rules)
	}
	return errs
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func autoscaling(d *kubecheck.Decoded, overlay string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch overlay {
	case "dev":
		if len(d.ScaledObjects) > 0 {
			fail("dev has a ScaledObject; a cluster without KEDA refuses the whole apply")
		}
		for _, dep := range d.Deployments {
			if dep.Spec.Replicas != nil && *dep.Spec.Replicas != 1 { // unset: the API's default, 1
				fail("dev: Deployment %s must run one replica", dep.Name)
			}
		}
	case "production":
		if len(d.ScaledObjects) != 1 {
			fail("production has %d ScaledObjects, want the consumers'", len(d.ScaledObjects))
		}
	}
	for _, so := range d.ScaledObjects {
		for _, dep := range d.Deployments {
			if dep.Name == so.Spec.ScaleTargetRef.Name && dep.Spec.Replicas != nil {
				fail("Deployment %s sets spec.replicas, which every apply would reset under %s's autoscaling", dep.Name, so.ID())
			}
		}
	}
	for _, so := range d.ScaledObjects {
		id := so.ID()
		if so.Spec.ScaleTargetRef.Name != "bulkreg-consumer" {
			continue
		}
		minimum, maximum := so.Replicas()
		if minimum < 1 {
			fail("%s: minReplicaCount must be at least 1: the signal comes from the consumers, so with none there is none", id)
		}
		if j, vars := topicsJob(d); j != nil && strconv.Itoa(int(maximum)) != vars["PARTITIONS"] {
			fail("%s: maxReplicaCount (%d) must equal the rows topic's partitions (%s): one partition has one consumer", id, maximum, vars["PARTITIONS"])
		}
		var consumer *appsv1.Deployment
		for _, dep := range d.Deployments {
			if dep.Name == "bulkreg-consumer" {
				consumer = dep
			}
		}
		if consumer == nil {
			continue
		}
		vars := env(d, consumer.Spec.Template.Spec.Containers[0])
		window, err1 := time.ParseDuration(vars["BULKREG_WINDOW"])
		margin, err2 := time.ParseDuration(vars["BULKREG_MARGIN"])
		if err := errors.Join(err1, err2); err != nil {
			fail("%s: the consumer's BULKREG_WINDOW and BULKREG_MARGIN must be set: %v", id, err)
			continue
		}
		if w, _ := so.ScaleDown(); time.Duration(w)*time.Second <= window+margin {
			fail("%s: the scale-down stabilization window (%d s) must be longer than BULKREG_WINDOW + BULKREG_MARGIN (%s): a seller's next window would bring back the consumer just removed", id, w, window+margin)
		}
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "prometheus" {
			fail("%s: want one Prometheus trigger", id)
			continue
		}
		tr := so.Spec.Triggers[0]
		query := tr.Metadata["query"]
		if !strings.Contains(query, "bulkreg_consumer_sendable_rows") {
			fail("%s: the query must scale on bulkreg_consumer_sendable_rows, got %q", id, query)
		}
		if ns := so.Namespace; ns != "" && !strings.Contains(query, `namespace="`+ns+`"`) {
			fail("%s: the query %q does not select this namespace (%s)", id, query, ns)
		}
		if tr.MetricType != "AverageValue" {
			fail("%s: metricType must be AverageValue (replicas = sum ÷ threshold), got %q", id, tr.MetricType)
		}
	}
	return errs
}

// settingsReaders maps each BULKREG_* variable in the settings tables of
// docs/configuration.md to the binaries that read it ("consumer", "producer serve",
// "registry-sandbox").
func settingsReaders(t *testing.T) map[string][]string {
	t.Helper()
	// The docs' own reader (clitest, which holds the tables to each
	// binary's flags), not a second parse of the tables.
	r, err := clitest.ReadDocs("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, s := range r.Settings {
		for _, reader := range s.Readers {
			switch reader {
			case "producer": // every subcommand, serve among them
				reader = "producer serve"
			case "consumer", "producer serve", "registry-sandbox":
			default:
				continue // a subcommand or binary no pod runs
			}
			if !slices.Contains(out[s.Env], reader) {
				out[s.Env] = append(out[s.Env], reader)
			}
		}
	}
	if len(out["BULKREG_KAFKA_BROKERS"]) == 0 || len(out["BULKREG_LISTEN"]) == 0 {
		t.Fatalf("docs/configuration.md's settings tables were not found (no BULKREG_KAFKA_BROKERS or BULKREG_LISTEN row)")
	}
	return out
}

// imageUser is the numeric user the Dockerfile's final stage runs as.
func imageUser(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER (\d+)`).FindAllStringSubmatch(string(b), -1)
	if len(m) == 0 {
		t.Fatal("the Dockerfile has no numeric USER")
	}
	uid, err := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// copyTree copies the manifests (not the tests) so a case can break a copy.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(to, path)
		if e.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
