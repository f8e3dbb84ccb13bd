package kubecheck

import (
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestAllows holds Allows to the NetworkPolicy API's rules: isolation only
// by a policy of that direction, rules ORed, selectors in a peer ANDed,
// ports by number, name, range and protocol, ipBlock with its exceptions.
func TestAllows(t *testing.T) {
	const policies = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: app}
spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: app}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress, Egress]
  ingress:
    - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}, podSelector: {matchLabels: {app: prometheus}}}]
      ports: [{port: metrics}]
  egress:
    - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kafka}}}]
      ports: [{port: 9092, endPort: 9094}]
    - to: [{ipBlock: {cidr: 0.0.0.0/0, except: [10.0.0.0/8]}}]
      ports: [{port: 443}]
    - to: [{podSelector: {matchLabels: {app: redis}}}]
      ports: [{protocol: TCP, port: 6379}]
`
	d, err := Validate(objects(t, strings.Split(policies, "\n---\n")...))
	if err != nil {
		t.Fatal(err)
	}
	web := Endpoint{Namespace: "app", Labels: map[string]string{"app": "web"}}
	other := Endpoint{Namespace: "app", Labels: map[string]string{"app": "other"}}
	ingress, egress := networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress
	for _, tc := range []struct {
		name      string
		dir       networkingv1.PolicyType
		pod, peer Endpoint
		port      Port
		want      bool
	}{
		{"Prometheus to the named metrics port", ingress, web, Endpoint{Namespace: "monitoring", Labels: map[string]string{"app": "prometheus"}}, Port{Number: 9464, Name: "metrics"}, true},
		{"another pod of monitoring (selectors ANDed)", ingress, web, Endpoint{Namespace: "monitoring", Labels: map[string]string{"app": "grafana"}}, Port{Number: 9464, Name: "metrics"}, false},
		{"Prometheus to another port", ingress, web, Endpoint{Namespace: "monitoring", Labels: map[string]string{"app": "prometheus"}}, Port{Number: 8080, Name: "http"}, false},
		{"a broker inside the port range, labels unknown", egress, web, Endpoint{Namespace: "kafka"}, Port{Number: 9093}, true},
		{"a broker beyond the range", egress, web, Endpoint{Namespace: "kafka"}, Port{Number: 9095}, false},
		{"an outside address on 443", egress, web, Endpoint{IP: net.ParseIP("203.0.113.10")}, Port{Number: 443}, true},
		{"an excepted address on 443", egress, web, Endpoint{IP: net.ParseIP("10.1.2.3")}, Port{Number: 443}, false},
		{"redis in the policy's namespace", egress, web, Endpoint{Namespace: "app", Labels: map[string]string{"app": "redis"}}, Port{Number: 6379}, true},
		{"redis over UDP", egress, web, Endpoint{Namespace: "app", Labels: map[string]string{"app": "redis"}}, Port{Number: 6379, Protocol: corev1.ProtocolUDP}, false},
		{"redis of another namespace (podSelector alone is the policy's namespace)", egress, web, Endpoint{Namespace: "redis", Labels: map[string]string{"app": "redis"}}, Port{Number: 6379}, false},
		{"a pod only the default denies", egress, other, Endpoint{Namespace: "kafka"}, Port{Number: 9093}, false},
		{"a pod of a namespace without policies", egress, Endpoint{Namespace: "free", Labels: map[string]string{"app": "web"}}, Endpoint{Namespace: "kafka"}, Port{Number: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.Allows(tc.dir, tc.pod, tc.peer, tc.port); got != tc.want {
				t.Errorf("Allows = %v, want %v", got, tc.want)
			}
		})
	}
	if !d.DeniesByDefault("app") || d.DeniesByDefault("free") {
		t.Error("DeniesByDefault: want app denied by default, free not")
	}
}
