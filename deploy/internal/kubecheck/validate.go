package kubecheck

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Decoded is a render whose every object passed Validate, with the built-in
// objects as their API types, for callers' own policy checks.
type Decoded struct {
	Objects      []Object
	Deployments  []*appsv1.Deployment
	StatefulSets []*appsv1.StatefulSet
	Jobs         []*batchv1.Job
	Services     []*corev1.Service
	ConfigMaps   []*corev1.ConfigMap
	PDBs         []*policyv1.PodDisruptionBudget
	Ingresses    []*networkingv1.Ingress
	// NetworkPolicies are the render's; Allows answers what they let through.
	NetworkPolicies []*networkingv1.NetworkPolicy
	// ScaledObjects are KEDA's, as generic JSON (KEDA's Go types are not a
	// dependency; the CRD schema checked them).
	ScaledObjects []ScaledObject
}

// ScaledObject is the part of a KEDA ScaledObject the checks read.
type ScaledObject struct {
	Object `json:"-"`
	Spec   struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		PollingInterval *int32 `json:"pollingInterval"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		Advanced        *struct {
			HorizontalPodAutoscalerConfig *struct {
				Behavior *struct {
					ScaleUp   *scalingRules `json:"scaleUp"`
					ScaleDown *scalingRules `json:"scaleDown"`
				} `json:"behavior"`
			} `json:"horizontalPodAutoscalerConfig"`
		} `json:"advanced"`
		Triggers []struct {
			Type       string            `json:"type"`
			Name       string            `json:"name"`
			MetricType string            `json:"metricType"`
			Metadata   map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

type scalingRules struct {
	StabilizationWindowSeconds *int32 `json:"stabilizationWindowSeconds"`
	Policies                   []struct {
		Type          string `json:"type"`
		Value         int32  `json:"value"`
		PeriodSeconds int32  `json:"periodSeconds"`
	} `json:"policies"`
}

// ScaleDown is the HPA scale-down behaviour the ScaledObject asks for: its
// stabilization window (the HPA's default, 300 s, when unset) and its
// policies.
func (s ScaledObject) ScaleDown() (windowSeconds int32, rules *scalingRules) {
	windowSeconds = 300
	if a := s.Spec.Advanced; a != nil && a.HorizontalPodAutoscalerConfig != nil && a.HorizontalPodAutoscalerConfig.Behavior != nil {
		if r := a.HorizontalPodAutoscalerConfig.Behavior.ScaleDown; r != nil {
			if r.StabilizationWindowSeconds != nil {
				windowSeconds = *r.StabilizationWindowSeconds
			}
			return windowSeconds, r
		}
	}
	return windowSeconds, nil
}

// Replicas is the ScaledObject's range with KEDA's defaults (0 and 100).
func (s ScaledObject) Replicas() (minimum, maximum int32) {
	minimum, maximum = 0, 100
	if s.Spec.MinReplicaCount != nil {
		minimum = *s.Spec.MinReplicaCount
	}
	if s.Spec.MaxReplicaCount != nil {
		maximum = *s.Spec.MaxReplicaCount
	}
	return minimum, maximum
}

// prometheusMetadata are the metadata keys of KEDA v2.21's Prometheus scaler
// (pkg/scalers/prometheus_scaler.go, the `keda:"name=…"` tags of
// prometheusMetadata, in the module the CRD comes from), true for those it
// requires. The CRD types metadata as a map of strings, so a misspelled key
// passes the schema; KEDA would then fail at run time or ignore it.
var prometheusMetadata = map[string]bool{
	"serverAddress": true, "query": true, "threshold": true,
	"queryParameters": false, "activationThreshold": false, "namespace": false, "customHeaders": false,
	"ignoreNullValues": false, "unsafeSsl": false, "awsRegion": false, "timeout": false, "identityOwner": false,
	// Authentication (pkg/scalers/authentication): normally through a
	// TriggerAuthentication instead.
	"authModes": false,
}

// checker holds what one Validate call needs; nothing outlives the call.
type checker struct {
	decoder runtime.Decoder
	crds    []crdSchema
	errs    []error
}

func newChecker() (*checker, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	var crds []crdSchema
	for _, doc := range [][]byte{kedaScaledObjectCRD, podMonitorCRD, prometheusRuleCRD} {
		cs, err := loadCRD(doc)
		if err != nil {
			return nil, err
		}
		crds = append(crds, cs...)
	}
	// EnableStrict: the decoder the API server uses for
	// fieldValidation=Strict, kubectl's default: unknown fields, duplicate
	// fields and fields in the wrong case are errors.
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	return &checker{decoder: codecs.UniversalDeserializer(), crds: crds}, nil
}

func (c *checker) fail(o Object, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", o.ID(), fmt.Sprintf(format, args...)))
}

// Validate decodes every object strictly, checks the fields the API server
// requires and the references between objects (selectors, named ports,
// ConfigMaps, scale targets), and returns the decoded render, or every
// problem found, each naming its object and field.
func Validate(objs []Object) (*Decoded, error) {
	c, err := newChecker()
	if err != nil {
		return nil, err
	}
	d := &Decoded{Objects: objs}
	for _, o := range objs {
		c.decode(d, o)
	}
	if len(c.errs) > 0 {
		// References are only worth checking between objects that decoded.
		return nil, errors.Join(c.errs...)
	}
	c.references(d)
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return d, nil
}

func (c *checker) decode(d *Decoded, o Object) {
	if problems := validation.IsDNS1123Subdomain(o.Name); len(problems) > 0 {
		c.fail(o, "metadata.name %q: %s", o.Name, strings.Join(problems, "; "))
	}
	if o.Namespace != "" {
		if problems := validation.IsDNS1123Label(o.Namespace); len(problems) > 0 {
			c.fail(o, "metadata.namespace %q: %s", o.Namespace, strings.Join(problems, "; "))
		}
	}
	for _, sch := range c.crds {
		if o.APIVersion == sch.apiVersion && o.Kind == sch.kind {
			if err := validateCR(sch, o); err != nil {
				c.errs = append(c.errs, err)
				return
			}
			if o.Kind == "ScaledObject" {
				c.scaledObject(d, o)
			}
			return
		}
	}
	obj, _, err := c.decoder.Decode(o.JSON, nil, nil)
	if err != nil {
		if runtime.IsNotRegisteredError(err) {
			c.fail(o, "no API types or CRD known for %s %s: add them to kubecheck to check this kind", o.APIVersion, o.Kind)
			return
		}
		c.fail(o, "%v", err)
		return
	}
	switch t := obj.(type) {
	case *appsv1.Deployment:
		d.Deployments = append(d.Deployments, t)
		c.workload(o, t.Spec.Selector, &t.Spec.Template)
		if t.Spec.Replicas != nil && *t.Spec.Replicas < 0 {
			c.fail(o, "spec.replicas must not be negative")
		}
	case *appsv1.StatefulSet:
		d.StatefulSets = append(d.StatefulSets, t)
		c.workload(o, t.Spec.Selector, &t.Spec.Template)
	case *batchv1.Job:
		d.Jobs = append(d.Jobs, t)
		if p := t.Spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyOnFailure && p != corev1.RestartPolicyNever {
			c.fail(o, "spec.template.spec.restartPolicy must be OnFailure or Never, got %q", p)
		}
		c.podSpec(o, "spec.template.spec", &t.Spec.Template.Spec)
	case *corev1.Service:
		d.Services = append(d.Services, t)
		if len(t.Spec.Ports) == 0 {
			c.fail(o, "spec.ports: required")
		}
		for i, p := range t.Spec.Ports {
			if problems := validation.IsValidPortNum(int(p.Port)); len(problems) > 0 {
				c.fail(o, "spec.ports[%d].port: %s", i, strings.Join(problems, "; "))
			}
			if len(t.Spec.Ports) > 1 && p.Name == "" {
				c.fail(o, "spec.ports[%d].name: required when a Service has several ports", i)
			}
		}
	case *corev1.ConfigMap:
		d.ConfigMaps = append(d.ConfigMaps, t)
		for k := range t.Data {
			if problems := validation.IsConfigMapKey(k); len(problems) > 0 {
				c.fail(o, "data key %q: %s", k, strings.Join(problems, "; "))
			}
		}
	case *corev1.Secret:
		// Nothing beyond the strict decode.
	case *policyv1.PodDisruptionBudget:
		d.PDBs = append(d.PDBs, t)
		if (t.Spec.MinAvailable == nil) == (t.Spec.MaxUnavailable == nil) {
			c.fail(o, "spec: exactly one of minAvailable and maxUnavailable is required")
		}
		if t.Spec.Selector == nil {
			c.fail(o, "spec.selector: required (without it the budget covers no pod)")
		}
	case *networkingv1.Ingress:
		d.Ingresses = append(d.Ingresses, t)
		c.ingress(o, t)
	case *networkingv1.NetworkPolicy:
		d.NetworkPolicies = append(d.NetworkPolicies, t)
		c.networkPolicy(o, t)
	default:
		c.fail(o, "decoded as %T, which kubecheck has no checks for", obj)
	}
}

// workload checks a controller's selector against its pod template, then
// the pod spec.
func (c *checker) workload(o Object, sel *metav1.LabelSelector, tpl *corev1.PodTemplateSpec) {
	s, err := selector(sel)
	switch {
	case err != nil:
		c.fail(o, "spec.selector: %v", err)
	case !s.Matches(labels.Set(tpl.Labels)):
		c.fail(o, "spec.selector %s does not match the pod template's labels %v", s, tpl.Labels)
	}
	c.podSpec(o, "spec.template.spec", &tpl.Spec)
}

func selector(sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return nil, errors.New("required, and must not be empty")
	}
	return metav1.LabelSelectorAsSelector(sel)
}

// podSpec checks what the API server requires of a pod: containers with a
// name and an image, ports, env sources, probes naming ports the container
// has, mounts naming volumes, requests not above limits.
func (c *checker) podSpec(o Object, path string, spec *corev1.PodSpec) {
	if len(spec.Containers) == 0 {
		c.fail(o, "%s.containers: required", path)
	}
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	names := map[string]bool{}
	for i := range spec.Containers {
		ct := &spec.Containers[i]
		p := fmt.Sprintf("%s.containers[%d]", path, i)
		if problems := validation.IsDNS1123Label(ct.Name); len(problems) > 0 {
			c.fail(o, "%s.name %q: %s", p, ct.Name, strings.Join(problems, "; "))
		}
		if names[ct.Name] {
			c.fail(o, "%s.name %q: duplicate", p, ct.Name)
		}
		names[ct.Name] = true
		if strings.TrimSpace(ct.Image) == "" {
			c.fail(o, "%s.image: required", p)
		}
		ports := map[string]int32{}
		for j, port := range ct.Ports {
			if problems := validation.IsValidPortNum(int(port.ContainerPort)); len(problems) > 0 {
				c.fail(o, "%s.ports[%d].containerPort: %s", p, j, strings.Join(problems, "; "))
			}
			if port.Name != "" {
				if problems := validation.IsValidPortName(port.Name); len(problems) > 0 {
					c.fail(o, "%s.ports[%d].name %q: %s", p, j, port.Name, strings.Join(problems, "; "))
				}
				ports[port.Name] = port.ContainerPort
			}
		}
		for j, e := range ct.Env {
			ep := fmt.Sprintf("%s.env[%d]", p, j)
			if problems := validation.IsEnvVarName(e.Name); len(problems) > 0 {
				c.fail(o, "%s.name %q: %s", ep, e.Name, strings.Join(problems, "; "))
			}
			if e.ValueFrom != nil {
				c.envSource(o, ep, e)
			}
		}
		for j, ef := range ct.EnvFrom {
			if (ef.ConfigMapRef == nil) == (ef.SecretRef == nil) {
				c.fail(o, "%s.envFrom[%d]: exactly one of configMapRef and secretRef is required", p, j)
			} else if ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == "" || ef.SecretRef != nil && ef.SecretRef.Name == "" {
				c.fail(o, "%s.envFrom[%d]: name required", p, j)
			}
		}
		for j, m := range ct.VolumeMounts {
			if !volumes[m.Name] {
				c.fail(o, "%s.volumeMounts[%d]: no volume named %q in the pod", p, j, m.Name)
			}
			if !strings.HasPrefix(m.MountPath, "/") {
				c.fail(o, "%s.volumeMounts[%d].mountPath %q must be absolute", p, j, m.MountPath)
			}
		}
		for name, pr := range map[string]*corev1.Probe{"startupProbe": ct.StartupProbe, "livenessProbe": ct.LivenessProbe, "readinessProbe": ct.ReadinessProbe} {
			c.probe(o, p+"."+name, pr, ports)
		}
		if h := ct.Lifecycle; h != nil && h.PreStop != nil {
			c.handler(o, p+".lifecycle.preStop", h.PreStop.Exec != nil, h.PreStop.HTTPGet != nil, h.PreStop.TCPSocket != nil, h.PreStop.Sleep != nil, nil, ports)
		}
		for res, req := range ct.Resources.Requests {
			if lim, ok := ct.Resources.Limits[res]; ok && req.Cmp(lim) > 0 {
				c.fail(o, "%s.resources: the %s request %s is above its limit %s", p, res, req.String(), lim.String())
			}
		}
	}
}

func (c *checker) envSource(o Object, path string, e corev1.EnvVar) {
	v := e.ValueFrom
	n := 0
	for _, set := range []bool{v.FieldRef != nil, v.ResourceFieldRef != nil, v.ConfigMapKeyRef != nil, v.SecretKeyRef != nil, v.FileKeyRef != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		c.fail(o, "%s.valueFrom: exactly one source is required, got %d", path, n)
	}
	if e.Value != "" {
		c.fail(o, "%s: value and valueFrom are exclusive", path)
	}
	if r := v.ConfigMapKeyRef; r != nil && (r.Name == "" || r.Key == "") {
		c.fail(o, "%s.valueFrom.configMapKeyRef: name and key are required", path)
	}
	if r := v.SecretKeyRef; r != nil && (r.Name == "" || r.Key == "") {
		c.fail(o, "%s.valueFrom.secretKeyRef: name and key are required", path)
	}
}

func (c *checker) probe(o Object, path string, p *corev1.Probe, ports map[string]int32) {
	if p == nil {
		return
	}
	h := p.ProbeHandler
	var port *intstr.IntOrString
	switch {
	case h.HTTPGet != nil:
		port = &h.HTTPGet.Port
	case h.TCPSocket != nil:
		port = &h.TCPSocket.Port
	}
	c.handler(o, path, h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil, port, ports)
	if p.PeriodSeconds < 0 || p.TimeoutSeconds < 0 || p.FailureThreshold < 0 {
		c.fail(o, "%s: periods, timeouts and thresholds must not be negative", path)
	}
}

// handler checks that a probe or hook has exactly one action and that a
// port it names by name is one the container declares.
func (c *checker) handler(o Object, path string, exec, http, tcp, other bool, port *intstr.IntOrString, ports map[string]int32) {
	n := 0
	for _, set := range []bool{exec, http, tcp, other} {
		if set {
			n++
		}
	}
	if n != 1 {
		c.fail(o, "%s: exactly one handler is required, got %d", path, n)
	}
	if port == nil {
		return
	}
	if port.Type == intstr.String {
		if _, ok := ports[port.StrVal]; !ok {
			c.fail(o, "%s: port %q is not a port the container declares (%v)", path, port.StrVal, slices.Sorted(maps.Keys(ports)))
		}
	} else if problems := validation.IsValidPortNum(int(port.IntVal)); len(problems) > 0 {
		c.fail(o, "%s: port: %s", path, strings.Join(problems, "; "))
	}
}

func (c *checker) scaledObject(d *Decoded, o Object) {
	var so ScaledObject
	if err := o.Unmarshal(&so); err != nil {
		c.errs = append(c.errs, err)
		return
	}
	so.Object = o
	// The CRD's one x-kubernetes-validations rule, which the schema
	// validator does not evaluate.
	if minimum, maximum := so.Replicas(); minimum > maximum {
		c.fail(o, "spec.minReplicaCount (%d) must be less than or equal to maxReplicaCount (%d)", minimum, maximum)
	}
	for i, t := range so.Spec.Triggers {
		if t.Type != "prometheus" {
			continue
		}
		for k := range t.Metadata {
			if _, ok := prometheusMetadata[k]; !ok {
				c.fail(o, "spec.triggers[%d].metadata.%s: not a setting of KEDA's Prometheus scaler (%v)", i, k, slices.Sorted(maps.Keys(prometheusMetadata)))
			}
		}
		for k, required := range prometheusMetadata {
			if required && strings.TrimSpace(t.Metadata[k]) == "" {
				c.fail(o, "spec.triggers[%d].metadata.%s: required by KEDA's Prometheus scaler", i, k)
			}
		}
		for _, k := range []string{"threshold", "activationThreshold"} {
			if v, ok := t.Metadata[k]; ok {
				if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0 || (k == "threshold" && f == 0) {
					c.fail(o, "spec.triggers[%d].metadata.%s %q: must be a number above 0", i, k, v)
				}
			}
		}
		for _, k := range []string{"ignoreNullValues", "unsafeSsl"} {
			if v, ok := t.Metadata[k]; ok {
				if _, err := strconv.ParseBool(v); err != nil {
					c.fail(o, "spec.triggers[%d].metadata.%s %q: must be true or false", i, k, v)
				}
			}
		}
	}
	d.ScaledObjects = append(d.ScaledObjects, so)
}

// references checks what one object says of another in the same render:
// Services and PodDisruptionBudgets select some workload's pods, a
// Service's named target port is a port of those pods, every ConfigMap a
// pod reads exists with the keys it reads, and a ScaledObject's target is
// a Deployment or StatefulSet of the render.
func (c *checker) references(d *Decoded) {
	type podsOf struct {
		id     string
		labels map[string]string
		spec   *corev1.PodSpec
	}
	var pods []podsOf
	for _, x := range d.Deployments {
		pods = append(pods, podsOf{"Deployment " + x.Name, x.Spec.Template.Labels, &x.Spec.Template.Spec})
	}
	for _, x := range d.StatefulSets {
		pods = append(pods, podsOf{"StatefulSet " + x.Name, x.Spec.Template.Labels, &x.Spec.Template.Spec})
	}
	for _, x := range d.Jobs {
		pods = append(pods, podsOf{"Job " + x.Name, x.Spec.Template.Labels, &x.Spec.Template.Spec})
	}
	object := func(kind, name string) Object { o, _ := Find(d.Objects, kind, name); return o }
	for _, s := range d.Services {
		o := object("Service", s.Name)
		if len(s.Spec.Selector) == 0 {
			continue // a Service without a selector has its endpoints set by hand
		}
		var selected []podsOf
		for _, p := range pods {
			if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.labels)) {
				selected = append(selected, p)
			}
		}
		if len(selected) == 0 {
			c.fail(o, "spec.selector %v selects no pod template of this render", s.Spec.Selector)
			continue
		}
		for i, port := range s.Spec.Ports {
			if port.TargetPort.Type != intstr.String {
				continue
			}
			for _, p := range selected {
				if !hasPort(p.spec, port.TargetPort.StrVal) {
					c.fail(o, "spec.ports[%d].targetPort %q: %s's pods have no port of that name", i, port.TargetPort.StrVal, p.id)
				}
			}
		}
	}
	for _, b := range d.PDBs {
		o := object("PodDisruptionBudget", b.Name)
		s, err := selector(b.Spec.Selector)
		if err != nil {
			c.fail(o, "spec.selector: %v", err)
			continue
		}
		if !slices.ContainsFunc(pods, func(p podsOf) bool { return s.Matches(labels.Set(p.labels)) }) {
			c.fail(o, "spec.selector %s selects no pod template of this render", s)
		}
	}
	configMaps := map[string]map[string]string{}
	for _, cm := range d.ConfigMaps {
		configMaps[cm.Name] = cm.Data
	}
	for _, p := range pods {
		kind, name, _ := strings.Cut(p.id, " ")
		o := object(kind, name)
		for _, ct := range p.spec.Containers {
			for _, ef := range ct.EnvFrom {
				if r := ef.ConfigMapRef; r != nil && (r.Optional == nil || !*r.Optional) {
					if _, ok := configMaps[r.Name]; !ok {
						c.fail(o, "container %s: envFrom ConfigMap %q is not in this render", ct.Name, r.Name)
					}
				}
			}
			for _, e := range ct.Env {
				if e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
					continue
				}
				r := e.ValueFrom.ConfigMapKeyRef
				if r.Optional != nil && *r.Optional {
					continue
				}
				data, ok := configMaps[r.Name]
				if !ok {
					c.fail(o, "container %s: env %s reads ConfigMap %q, which is not in this render", ct.Name, e.Name, r.Name)
				} else if _, ok := data[r.Key]; !ok {
					c.fail(o, "container %s: env %s reads key %q, which ConfigMap %q does not have", ct.Name, e.Name, r.Key, r.Name)
				}
			}
		}
	}
	for _, ing := range d.Ingresses {
		c.ingressBackends(d, ing)
	}
	for _, so := range d.ScaledObjects {
		ref := so.Spec.ScaleTargetRef
		kind := ref.Kind
		if kind == "" {
			kind = "Deployment" // KEDA's default
		}
		if _, ok := Find(d.Objects, kind, ref.Name); !ok || (kind != "Deployment" && kind != "StatefulSet") {
			c.fail(so.Object, "spec.scaleTargetRef: no Deployment or StatefulSet %s %q in this render", kind, ref.Name)
		}
	}
}

func hasPort(spec *corev1.PodSpec, name string) bool {
	for _, ct := range spec.Containers {
		for _, p := range ct.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}
