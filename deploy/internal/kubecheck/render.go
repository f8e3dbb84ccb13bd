// Package kubecheck renders kustomize directories the way `kubectl apply -k`
// does and checks every object offline: strictly decoded into the Kubernetes
// API types (an unknown, misspelled or wrongly cased field is an error, as
// with kubectl's default --validate=strict), the fields the API server
// requires present, references between objects resolved, and custom
// resources validated against their CRD's openAPIV3Schema with unknown
// fields refused. No cluster and no network: what it cannot check (admission
// webhooks, a cluster's own policies) is left to a dry run against one.
package kubecheck

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Object is one rendered object.
type Object struct {
	APIVersion, Kind, Namespace, Name string
	// JSON is the whole object as kustomize emitted it.
	JSON []byte
}

// ID names the object in messages: "Deployment bulkreg/bulkreg-consumer".
func (o Object) ID() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Render runs kustomize on dir, read from disk, with kustomize's defaults
// (files only from inside each kustomization's root, no plugins, no network
// fetch of remote bases: a remote base is an error here, as it should be for
// manifests checked offline).
func Render(dir string) ([]Object, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objs []Object
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s %s: %w", dir, r.GetKind(), r.GetName(), err)
		}
		objs = append(objs, Object{APIVersion: r.GetApiVersion(), Kind: r.GetKind(), Namespace: r.GetNamespace(), Name: r.GetName(), JSON: b})
	}
	return objs, nil
}

// Find returns the object of that kind and name (names are unique per kind
// in one render).
func Find(objs []Object, kind, name string) (Object, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			return o, true
		}
	}
	return Object{}, false
}

// Unmarshal decodes an object's JSON into v, for callers that read fields
// after Validate accepted it.
func (o Object) Unmarshal(v any) error {
	if err := json.Unmarshal(o.JSON, v); err != nil {
		return fmt.Errorf("%s: %w", o.ID(), err)
	}
	return nil
}
