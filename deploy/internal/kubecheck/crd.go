package kubecheck

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

//go:embed crds/keda.sh_scaledobjects.yaml
var kedaScaledObjectCRD []byte

// The Prometheus Operator's PodMonitor and PrometheusRule (v0.93.0,
// example/prometheus-operator-crd/ of its repository), which
// deploy/k8s/components/monitoring uses.
var (
	//go:embed crds/monitoring.coreos.com_podmonitors.yaml
	podMonitorCRD []byte
	//go:embed crds/monitoring.coreos.com_prometheusrules.yaml
	prometheusRuleCRD []byte
)

// crdSchema is one served version of a custom resource, compiled.
type crdSchema struct {
	apiVersion, kind string
	schema           *jsonschema.Schema
}

// loadCRD compiles the openAPIV3Schema of every served version of a CRD.
func loadCRD(doc []byte) ([]crdSchema, error) {
	var crd struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &crd); err != nil {
		return nil, fmt.Errorf("read the CRD: %w", err)
	}
	var out []crdSchema
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		apiVersion := crd.Spec.Group + "/" + v.Name
		// Through JSON so the compiler sees json.Number, as it does for
		// the instances.
		b, err := json.Marshal(structural(v.Schema.OpenAPIV3Schema))
		if err != nil {
			return nil, err
		}
		s, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		url := "crd:" + apiVersion + "/" + crd.Spec.Names.Kind
		if err := c.AddResource(url, s); err != nil {
			return nil, fmt.Errorf("the CRD schema of %s %s: %w", apiVersion, crd.Spec.Names.Kind, err)
		}
		sch, err := c.Compile(url)
		if err != nil {
			return nil, fmt.Errorf("the CRD schema of %s %s: %w", apiVersion, crd.Spec.Names.Kind, err)
		}
		out = append(out, crdSchema{apiVersion: apiVersion, kind: crd.Spec.Names.Kind, schema: sch})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the CRD %s has no served version with a schema", crd.Spec.Names.Kind)
	}
	return out, nil
}

// structural turns a CRD's OpenAPI v3 schema into a JSON Schema that
// refuses what the API server would not keep:
//
//   - an object with properties and neither additionalProperties nor
//     x-kubernetes-preserve-unknown-fields gets additionalProperties: false.
//     The API server prunes such unknown fields, and kubectl's
//     --validate=strict (its default) refuses them; either way the setting
//     would silently not exist.
//   - nullable: true admits null, as OpenAPI means it.
//
// The x-kubernetes-* extensions are dropped (int-or-string is already an
// anyOf in generated CRDs); x-kubernetes-validations (CEL) rules are not
// evaluated here, so callers check those by hand.
func structural(s map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		if strings.HasPrefix(k, "x-kubernetes-") || k == "nullable" {
			continue
		}
		switch k {
		case "properties":
			props := map[string]any{}
			for name, p := range v.(map[string]any) {
				props[name] = structural(p.(map[string]any))
			}
			out[k] = props
		case "items", "not":
			if m, ok := v.(map[string]any); ok {
				out[k] = structural(m)
			} else {
				out[k] = v
			}
		case "additionalProperties":
			if m, ok := v.(map[string]any); ok {
				out[k] = structural(m)
			} else {
				out[k] = v
			}
		case "anyOf", "allOf", "oneOf":
			var list []any
			for _, e := range v.([]any) {
				list = append(list, structural(e.(map[string]any)))
			}
			out[k] = list
		default:
			out[k] = v
		}
	}
	_, open := s["additionalProperties"]
	if preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool); preserve {
		open = true
	}
	if _, hasProps := s["properties"]; hasProps && !open {
		out["additionalProperties"] = false
	}
	if nullable, _ := s["nullable"].(bool); nullable {
		if t, ok := out["type"].(string); ok {
			out["type"] = []any{t, "null"}
		}
	}
	return out
}

// validateCR checks one custom resource against its CRD schema.
func validateCR(sch crdSchema, o Object) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(o.JSON))
	if err != nil {
		return fmt.Errorf("%s: %w", o.ID(), err)
	}
	if err := sch.schema.Validate(inst); err != nil {
		return fmt.Errorf("%s does not match the CRD schema of %s %s: %w", o.ID(), sch.apiVersion, sch.kind, err)
	}
	return nil
}
