package kubecheck

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ingress checks what the API server requires of an Ingress: rules with a
// host that is a DNS name, paths with a type, backends naming a Service and
// one port, TLS entries naming their Secret.
func (c *checker) ingress(o Object, ing *networkingv1.Ingress) {
	if len(ing.Spec.Rules) == 0 && ing.Spec.DefaultBackend == nil {
		c.fail(o, "spec: rules or defaultBackend is required")
	}
	if b := ing.Spec.DefaultBackend; b != nil {
		c.ingressBackend(o, "spec.defaultBackend", b)
	}
	for i, r := range ing.Spec.Rules {
		p := "spec.rules[" + itoa(i) + "]"
		if r.Host != "" {
			if problems := validation.IsWildcardDNS1123Subdomain(r.Host); strings.HasPrefix(r.Host, "*.") && len(problems) > 0 {
				c.fail(o, "%s.host %q: %s", p, r.Host, strings.Join(problems, "; "))
			} else if problems := validation.IsDNS1123Subdomain(r.Host); !strings.HasPrefix(r.Host, "*.") && len(problems) > 0 {
				c.fail(o, "%s.host %q: %s", p, r.Host, strings.Join(problems, "; "))
			}
		}
		if r.HTTP == nil {
			continue
		}
		if len(r.HTTP.Paths) == 0 {
			c.fail(o, "%s.http.paths: required", p)
		}
		for j, path := range r.HTTP.Paths {
			pp := p + ".http.paths[" + itoa(j) + "]"
			if path.PathType == nil {
				c.fail(o, "%s.pathType: required (Exact, Prefix or ImplementationSpecific)", pp)
			} else if t := *path.PathType; t != networkingv1.PathTypeExact && t != networkingv1.PathTypePrefix && t != networkingv1.PathTypeImplementationSpecific {
				c.fail(o, "%s.pathType %q: want Exact, Prefix or ImplementationSpecific", pp, t)
			}
			if !strings.HasPrefix(path.Path, "/") {
				c.fail(o, "%s.path %q: must be absolute", pp, path.Path)
			}
			c.ingressBackend(o, pp+".backend", &path.Backend)
		}
	}
	for i, t := range ing.Spec.TLS {
		if t.SecretName == "" {
			c.fail(o, "spec.tls[%d].secretName: required (the certificate and key)", i)
		}
	}
}

func (c *checker) ingressBackend(o Object, path string, b *networkingv1.IngressBackend) {
	if (b.Service == nil) == (b.Resource == nil) {
		c.fail(o, "%s: exactly one of service and resource is required", path)
		return
	}
	if s := b.Service; s != nil {
		if s.Name == "" {
			c.fail(o, "%s.service.name: required", path)
		}
		if (s.Port.Name == "") == (s.Port.Number == 0) {
			c.fail(o, "%s.service.port: exactly one of name and number is required", path)
		}
	}
}

// ingressBackends checks that each backend Service is in the render and has
// the port the Ingress names.
func (c *checker) ingressBackends(d *Decoded, ing *networkingv1.Ingress) {
	o, _ := Find(d.Objects, "Ingress", ing.Name)
	var backends []*networkingv1.IngressServiceBackend
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
		backends = append(backends, b.Service)
	}
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			if p.Backend.Service != nil {
				backends = append(backends, p.Backend.Service)
			}
		}
	}
	for _, b := range backends {
		var svc *corev1.Service
		for _, s := range d.Services {
			if s.Name == b.Name {
				svc = s
			}
		}
		if svc == nil {
			c.fail(o, "backend Service %q is not in this render", b.Name)
			continue
		}
		found := false
		for _, p := range svc.Spec.Ports {
			if b.Port.Name != "" && p.Name == b.Port.Name || b.Port.Number != 0 && p.Port == b.Port.Number {
				found = true
			}
		}
		if !found {
			c.fail(o, "backend Service %q has no port %s", b.Name, portText(b.Port))
		}
	}
}

func portText(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return "named " + p.Name
	}
	return itoa(int(p.Number))
}

// networkPolicy checks a NetworkPolicy's selectors, policy types, ports and
// address blocks.
func (c *checker) networkPolicy(o Object, np *networkingv1.NetworkPolicy) {
	if _, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil {
		c.fail(o, "spec.podSelector: %v", err)
	}
	for i, t := range np.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			c.fail(o, "spec.policyTypes[%d] %q: want Ingress or Egress", i, t)
		}
	}
	check := func(path string, ports []networkingv1.NetworkPolicyPort, peers []networkingv1.NetworkPolicyPeer) {
		for j, p := range ports {
			if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP && *p.Protocol != corev1.ProtocolUDP && *p.Protocol != corev1.ProtocolSCTP {
				c.fail(o, "%s.ports[%d].protocol %q: want TCP, UDP or SCTP", path, j, *p.Protocol)
			}
			if p.EndPort != nil && (p.Port == nil || p.Port.StrVal != "" || *p.EndPort < p.Port.IntVal) {
				c.fail(o, "%s.ports[%d].endPort: needs a numeric port at or below it", path, j)
			}
		}
		for j, peer := range peers {
			pp := path + ".peers[" + itoa(j) + "]"
			if peer.IPBlock != nil && (peer.PodSelector != nil || peer.NamespaceSelector != nil) {
				c.fail(o, "%s: ipBlock cannot be combined with a selector", pp)
			}
			if b := peer.IPBlock; b != nil {
				cidr, err := netip.ParsePrefix(b.CIDR)
				if err != nil {
					c.fail(o, "%s.ipBlock.cidr %q: %v", pp, b.CIDR, err)
					continue
				}
				for _, e := range b.Except {
					if ex, err := netip.ParsePrefix(e); err != nil || !cidr.Contains(ex.Addr()) || ex.Bits() < cidr.Bits() {
						c.fail(o, "%s.ipBlock.except %q: must be a CIDR inside %s", pp, e, b.CIDR)
					}
				}
			}
			for _, sel := range []*metav1.LabelSelector{peer.PodSelector, peer.NamespaceSelector} {
				if sel == nil {
					continue
				}
				if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
					c.fail(o, "%s: %v", pp, err)
				}
			}
		}
	}
	for i, r := range np.Spec.Ingress {
		check("spec.ingress["+itoa(i)+"]", r.Ports, r.From)
	}
	for i, r := range np.Spec.Egress {
		check("spec.egress["+itoa(i)+"]", r.Ports, r.To)
	}
}

// Endpoint is one end of a connection a NetworkPolicy may allow: a pod (its
// namespace, that namespace's labels and its own labels; nil Labels: a pod
// whose labels this render does not know, which only a rule selecting every
// pod of its namespace admits) or an address outside the cluster (IP set).
type Endpoint struct {
	Namespace       string
	NamespaceLabels map[string]string
	Labels          map[string]string
	IP              net.IP
}

// Port is the destination of a connection: its number, the container
// port's name when the destination is a pod that names it, and the protocol
// (TCP when empty).
type Port struct {
	Number   int32
	Name     string
	Protocol corev1.Protocol
}

// Allows tells whether the render's NetworkPolicies let pod (a pod of this
// render) open a connection to peer on port (egress), or peer open one to
// pod (ingress), as the NetworkPolicy API defines it: a pod no policy of
// that direction selects is not isolated and allows everything; an isolated
// one allows what some rule of a policy selecting it allows. Only pod's side
// is judged: the peer's own policies are the peer's business.
func (d *Decoded) Allows(direction networkingv1.PolicyType, pod Endpoint, peer Endpoint, port Port) bool {
	isolated := false
	for _, np := range d.NetworkPolicies {
		if np.Namespace != pod.Namespace || !selects(&np.Spec.PodSelector, pod.Labels) || !hasType(np, direction) {
			continue
		}
		isolated = true
		if direction == networkingv1.PolicyTypeIngress {
			for _, r := range np.Spec.Ingress {
				if portMatches(r.Ports, port) && peerMatches(np.Namespace, r.From, peer) {
					return true
				}
			}
		} else {
			for _, r := range np.Spec.Egress {
				if portMatches(r.Ports, port) && peerMatches(np.Namespace, r.To, peer) {
					return true
				}
			}
		}
	}
	return !isolated
}

// DeniesByDefault tells whether some policy in namespace selects every pod
// and isolates it in both directions.
func (d *Decoded) DeniesByDefault(namespace string) bool {
	for _, np := range d.NetworkPolicies {
		if np.Namespace == namespace && len(np.Spec.PodSelector.MatchLabels) == 0 && len(np.Spec.PodSelector.MatchExpressions) == 0 &&
			hasType(np, networkingv1.PolicyTypeIngress) && hasType(np, networkingv1.PolicyTypeEgress) {
			return true
		}
	}
	return false
}

// hasType: policyTypes as the API server defaults them when unset (Ingress,
// and Egress when there are egress rules).
func hasType(np *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return t == networkingv1.PolicyTypeIngress || len(np.Spec.Egress) > 0
	}
	for _, x := range np.Spec.PolicyTypes {
		if x == t {
			return true
		}
	}
	return false
}

func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	if s.Empty() {
		return true
	}
	return set != nil && s.Matches(labels.Set(set))
}

func portMatches(ports []networkingv1.NetworkPolicyPort, port Port) bool {
	if len(ports) == 0 {
		return true
	}
	proto := port.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	for _, p := range ports {
		want := corev1.ProtocolTCP
		if p.Protocol != nil {
			want = *p.Protocol
		}
		if want != proto {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.StrVal != "":
			if p.Port.StrVal == port.Name {
				return true
			}
		case p.EndPort != nil:
			if port.Number >= p.Port.IntVal && port.Number <= *p.EndPort {
				return true
			}
		case p.Port.IntVal == port.Number:
			return true
		}
	}
	return false
}

func peerMatches(policyNamespace string, peers []networkingv1.NetworkPolicyPeer, e Endpoint) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if b := p.IPBlock; b != nil {
			if e.IP != nil && inBlock(b, e.IP) {
				return true
			}
			continue
		}
		if e.IP != nil {
			continue // a selector selects pods, not outside addresses
		}
		nsOK := e.Namespace == policyNamespace
		if p.NamespaceSelector != nil {
			nsLabels := map[string]string{"kubernetes.io/metadata.name": e.Namespace}
			for k, v := range e.NamespaceLabels {
				nsLabels[k] = v
			}
			nsOK = selects(p.NamespaceSelector, nsLabels)
		}
		podOK := true
		if p.PodSelector != nil {
			podOK = selects(p.PodSelector, e.Labels)
		}
		if nsOK && podOK {
			return true
		}
	}
	return false
}

func inBlock(b *networkingv1.IPBlock, ip net.IP) bool {
	_, cidr, err := net.ParseCIDR(b.CIDR)
	if err != nil || !cidr.Contains(ip) {
		return false
	}
	for _, e := range b.Except {
		if _, ex, err := net.ParseCIDR(e); err == nil && ex.Contains(ip) {
			return false
		}
	}
	return true
}

func itoa(i int) string { return strconv.Itoa(i) }
