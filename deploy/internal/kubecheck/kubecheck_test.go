package kubecheck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// objects turns YAML documents into Objects, as Render would emit them.
func objects(t *testing.T, docs ...string) []Object {
	t.Helper()
	var out []Object
	for _, d := range docs {
		b := []byte(d) // JSON as it is: YAML would merge duplicate keys
		if !strings.HasPrefix(d, "{") {
			var err error
			if b, err = yaml.YAMLToJSON(b); err != nil {
				t.Fatal(err)
			}
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct{ Name, Namespace string }
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		out = append(out, Object{APIVersion: meta.APIVersion, Kind: meta.Kind, Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace, JSON: b})
	}
	return out
}

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: example/web:1
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /, port: http}}
`

const service = `
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
`

const ingress = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  tls: [{hosts: [web.example.com], secretName: web-tls}]
  rules:
    - host: web.example.com
      http:
        paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}]
`

const scaledObject = `
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: web}
spec:
  scaleTargetRef: {name: web}
  minReplicaCount: 1
  maxReplicaCount: 4
  triggers:
    - type: prometheus
      metadata: {serverAddress: "http://p:9090", query: "sum(x)", threshold: "10"}
`

func TestValidate(t *testing.T) {
	edit := func(doc, old, new string) string {
		if !strings.Contains(doc, old) {
			t.Fatalf("the fixture lacks %q", old)
		}
		return strings.Replace(doc, old, new, 1)
	}
	cases := []struct {
		name string
		docs []string
		want string // "" passes
	}{
		{"a valid Deployment and its ScaledObject", []string{deployment, scaledObject}, ""},
		{"unknown field", []string{edit(deployment, "containerPort", "containerport")}, `unknown field "spec.template.spec.containers[0].ports[0].containerport"`},
		{"duplicate field", []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"A":"1"},"data":{"B":"2"}}`}, `duplicate field "data"`},
		{"missing image", []string{edit(deployment, "image: example/web:1", "")}, "containers[0].image: required"},
		{"selector not matching the template", []string{edit(deployment, "matchLabels: {app: web}", "matchLabels: {app: api}")}, "does not match the pod template's labels"},
		{"probe on an undeclared port", []string{edit(deployment, "port: http}", "port: admin}")}, `port "admin" is not a port the container declares`},
		{"a kind kubecheck does not know", []string{"apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: web}\n"}, "no API types or CRD known for gateway.networking.k8s.io/v1 Gateway"},
		{"Ingress without rules", []string{"apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\n"}, "rules or defaultBackend is required"},
		{"Ingress to a missing Service", []string{deployment, ingress}, `backend Service "web" is not in this render`},
		{"Ingress to a port the Service lacks", []string{deployment, service, edit(ingress, "name: http}", "name: https}")}, `backend Service "web" has no port named https`},
		{"Ingress path without a type", []string{deployment, service, edit(ingress, "pathType: Prefix, ", "")}, "pathType: required"},
		{"Ingress TLS without a Secret", []string{deployment, service, edit(ingress, "secretName: web-tls", "hosts: [web.example.com]")}, "secretName: required"},
		{"NetworkPolicy with a bad CIDR", []string{"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: np}\nspec:\n  podSelector: {}\n  egress: [{to: [{ipBlock: {cidr: 10.0.0.0/33}}]}]\n"}, `ipBlock.cidr "10.0.0.0/33"`},
		{"NetworkPolicy with a misspelt field", []string{"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: np}\nspec:\n  podSelector: {}\n  policyType: [Ingress]\n"}, `unknown field "spec.policyType"`},
		{"Service selecting no pod", []string{deployment, "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: api}\n  ports: [{port: 80, targetPort: http}]\n"}, "selects no pod template"},
		{"Service on a port the pods lack", []string{deployment, "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80, targetPort: https}]\n"}, `targetPort "https"`},
		{"budget with both bounds", []string{deployment, "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec:\n  minAvailable: 1\n  maxUnavailable: 1\n  selector: {matchLabels: {app: web}}\n"}, "exactly one of minAvailable and maxUnavailable"},
		{"Job that restarts Always", []string{"apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      restartPolicy: Always\n      containers: [{name: j, image: x}]\n"}, "restartPolicy must be OnFailure or Never"},
		{"env from a missing ConfigMap key", []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {A: x}\n", edit(deployment, "          image: example/web:1", "          image: example/web:1\n          env: [{name: B, valueFrom: {configMapKeyRef: {name: c, key: B}}}]")}, `reads key "B", which ConfigMap "c" does not have`},
		{"ScaledObject field misspelled", []string{deployment, edit(scaledObject, "maxReplicaCount", "maxReplicasCount")}, "additional properties 'maxReplicasCount' not allowed"},
		{"ScaledObject without triggers", []string{deployment, edit(scaledObject, "  triggers:", "  ignored:")}, "missing property 'triggers'"},
		{"ScaledObject min above max", []string{deployment, edit(scaledObject, "minReplicaCount: 1", "minReplicaCount: 5")}, "minReplicaCount (5) must be less than or equal to maxReplicaCount (4)"},
		{"ScaledObject aiming at nothing", []string{edit(scaledObject, "{name: web}\n  min", "{name: api}\n  min")}, `no Deployment or StatefulSet Deployment "api"`},
		{"Prometheus trigger without a threshold", []string{deployment, edit(scaledObject, `, threshold: "10"`, "")}, "metadata.threshold: required"},
		{"Prometheus threshold not a number", []string{deployment, edit(scaledObject, `threshold: "10"`, `threshold: "ten"`)}, `metadata.threshold "ten": must be a number above 0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(objects(t, tc.docs...))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("passed; want an error naming %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error does not name %q:\n%v", tc.want, err)
			}
		})
	}
}

// TestStructural checks the CRD-schema conversion: objects with properties
// close, maps and preserved objects stay open, nullable admits null.
func TestStructural(t *testing.T) {
	in := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"spec": map[string]any{"type": "object", "properties": map[string]any{
				"labels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
				"raw":    map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": map[string]any{"a": map[string]any{"type": "string"}}},
				"name":   map[string]any{"type": "string", "nullable": true},
				"items":  map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"type": "integer"}}}},
			}},
		},
	}
	out := structural(in)
	get := func(m map[string]any, path ...string) map[string]any {
		for _, p := range path {
			m = m[p].(map[string]any)
		}
		return m
	}
	if out["additionalProperties"] != false || get(out, "properties", "spec")["additionalProperties"] != false {
		t.Error("objects with properties must refuse unknown ones")
	}
	if get(out, "properties", "spec", "properties", "items", "items")["additionalProperties"] != false {
		t.Error("an array's item objects must refuse unknown properties")
	}
	if _, ok := get(out, "properties", "spec", "properties", "labels")["additionalProperties"].(map[string]any); !ok {
		t.Error("a map keeps its additionalProperties schema")
	}
	if _, ok := get(out, "properties", "spec", "properties", "raw")["additionalProperties"]; ok {
		t.Error("x-kubernetes-preserve-unknown-fields keeps an object open")
	}
	if typ := get(out, "properties", "spec", "properties", "name")["type"]; len(typ.([]any)) != 2 {
		t.Errorf("nullable string became type %v, want [string null]", typ)
	}
}

// TestRender renders a tiny kustomization from disk: what Validate checks is
// kustomize's output (names with hashes, namespace applied).
func TestRender(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kustomization.yaml": "namespace: ns\nresources: [deploy.yaml]\nconfigMapGenerator: [{name: c, literals: [A=1]}]\n",
		"deploy.yaml":        strings.Replace(deployment, "          image: example/web:1", "          image: example/web:1\n          envFrom: [{configMapRef: {name: c}}]", 1),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Validate(objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.ConfigMaps) != 1 || !strings.HasPrefix(d.ConfigMaps[0].Name, "c-") || d.ConfigMaps[0].Namespace != "ns" {
		t.Fatalf("ConfigMaps %v: want one named c-<hash> in ns", d.ConfigMaps)
	}
	if ref := d.Deployments[0].Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name; ref != d.ConfigMaps[0].Name {
		t.Fatalf("the Deployment reads ConfigMap %q, kustomize named it %q", ref, d.ConfigMaps[0].Name)
	}
	if _, err := Render(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("rendering a directory without a kustomization succeeded")
	}
}
