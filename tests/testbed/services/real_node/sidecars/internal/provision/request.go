// Package provision builds what external-provisioner v5.3 sends and creates
// (CreateVolumeRequest from a PVC and its StorageClass, the PersistentVolume
// from the response) as pure functions, and implements the
// sig-storage-lib-external-provisioner Provisioner on top of a CSI
// Controller service.
//
// Test tier only (a stand-in for the csi-provisioner image, which the Go
// module proxy does not serve); never shipped.
package provision

import (
	"fmt"
	"os"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Prefix of the StorageClass parameters the provisioner consumes itself.
const Prefix = "csi.storage.k8s.io/"

// Annotations and keys written by external-provisioner.
const (
	AnnDeletionSecretName      = "volume.kubernetes.io/provisioner-deletion-secret-name"
	AnnDeletionSecretNamespace = "volume.kubernetes.io/provisioner-deletion-secret-namespace"
	IdentityKey                = "storage.kubernetes.io/csiProvisionerIdentity"
	ParamPVCName               = Prefix + "pvc/name"
	ParamPVCNamespace          = Prefix + "pvc/namespace"
	ParamPVName                = Prefix + "pv/name"
)

// SecretType is one kind of secret a StorageClass can reference.
type SecretType string

// The secret types external-provisioner v5.3 knows. (controller-modify
// arrived in v6.2; with v5.3 its keys are unknown reserved keys.)
const (
	ProvisionerSecret       SecretType = "provisioner"
	ControllerPublishSecret SecretType = "controller-publish"
	NodeStageSecret         SecretType = "node-stage"
	NodePublishSecret       SecretType = "node-publish"
	ControllerExpandSecret  SecretType = "controller-expand"
	NodeExpandSecret        SecretType = "node-expand"
)

// SecretTypes in the order external-provisioner resolves them.
var SecretTypes = []SecretType{ProvisionerSecret, ControllerPublishSecret, NodeStageSecret, NodePublishSecret, ControllerExpandSecret, NodeExpandSecret}

// Deprecated un-prefixed keys, honoured as references and left in parameters.
var deprecatedKeys = map[SecretType][2]string{
	ProvisionerSecret:       {"csiProvisionerSecretName", "csiProvisionerSecretNamespace"},
	ControllerPublishSecret: {"csiControllerPublishSecretName", "csiControllerPublishSecretNamespace"},
	NodeStageSecret:         {"csiNodeStageSecretName", "csiNodeStageSecretNamespace"},
	NodePublishSecret:       {"csiNodePublishSecretName", "csiNodePublishSecretNamespace"},
}

func reservedKeys() map[string]bool {
	keys := map[string]bool{"fstype": true, "secret-name": true, "secret-namespace": true}
	for _, t := range SecretTypes {
		keys[string(t)+"-secret-name"] = true
		keys[string(t)+"-secret-namespace"] = true
	}
	return keys
}

// StripParameters removes the provisioner's csi.storage.k8s.io/ keys (exact
// names); any other key in that namespace is an error, as upstream. Other keys,
// the deprecated un-prefixed fstype and csi*Secret* keys included, are kept.
func StripParameters(params map[string]string) (map[string]string, error) {
	reserved := reservedKeys()
	out := map[string]string{}
	for k, v := range params {
		if rest, ok := strings.CutPrefix(k, Prefix); ok {
			if reserved[rest] {
				continue
			}
			return nil, fmt.Errorf("found unknown parameter key %q with reserved namespace %s", k, Prefix)
		}
		out[k] = v
	}
	return out, nil
}

// FsType from the StorageClass (csi.storage.k8s.io/fstype, or the deprecated
// fstype matched case-insensitively; both is an error), else def.
func FsType(params map[string]string, def string) (string, error) {
	var fs string
	found := 0
	for k, v := range params {
		if k == Prefix+"fstype" || strings.ToLower(k) == "fstype" {
			fs = v
			found++
		}
	}
	if found > 1 {
		return "", fmt.Errorf("fstype specified in parameters with both \"fstype\" and \"%sfstype\" keys", Prefix)
	}
	if fs == "" {
		fs = def
	}
	return fs, nil
}

// SecretRef is a resolved secret reference.
type SecretRef struct{ Name, Namespace string }

// ResolveSecretRef returns the reference of type t from the parameters, with
// templates resolved; nil when none is configured. Like upstream's
// verifyAndGetSecretNameAndNamespaceTemplate, the specific pair
// (csi.storage.k8s.io/<type>-secret-name/-namespace) and the deprecated
// un-prefixed pair are both looked at (both set: error; half a pair: error);
// without either, the generic csi.storage.k8s.io/secret-name/-namespace pair
// applies. pvc may be a stub holding only name and namespace (delete path).
func ResolveSecretRef(params map[string]string, t SecretType, pvName string, pvc *v1.PersistentVolumeClaim) (*SecretRef, error) {
	type pair struct{ name, ns string }
	pairs := []pair{{Prefix + string(t) + "-secret-name", Prefix + string(t) + "-secret-namespace"}}
	if dk, ok := deprecatedKeys[t]; ok {
		pairs = append([]pair{{dk[0], dk[1]}}, pairs...)
	}
	var nameTpl, nsTpl string
	numName, numNs := 0, 0
	for _, p := range pairs {
		if v, ok := params[p.name]; ok {
			nameTpl = v
			numName++
		}
		if v, ok := params[p.ns]; ok {
			nsTpl = v
			numNs++
		}
	}
	if numName == 0 && numNs == 0 {
		if v, ok := params[Prefix+"secret-name"]; ok {
			nameTpl = v
			numName++
		}
		if v, ok := params[Prefix+"secret-namespace"]; ok {
			nsTpl = v
			numNs++
		}
	}
	switch {
	case numName > 1 || numNs > 1:
		return nil, fmt.Errorf("%s secret: the deprecated and the %s keys cannot both be set", t, Prefix)
	case numName != numNs:
		return nil, fmt.Errorf("either name and namespace for %s secrets specified, Both must be specified", t)
	case numName == 0:
		return nil, nil
	case nameTpl == "" || nsTpl == "":
		return nil, fmt.Errorf("%s secrets specified in parameters but value is either empty or invalid", t)
	}
	nsVars := map[string]string{"pv.name": pvName}
	if pvc != nil {
		nsVars["pvc.namespace"] = pvc.Namespace
	}
	ns, err := expand(nsTpl, nsVars)
	if err != nil {
		return nil, fmt.Errorf("error resolving value %q: %v", nsTpl, err)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("%q resolved to %q which is not a valid namespace name: %s", nsTpl, ns, strings.Join(errs, "; "))
	}
	nameVars := map[string]string{"pv.name": pvName}
	if pvc != nil {
		nameVars["pvc.name"] = pvc.Name
		nameVars["pvc.namespace"] = pvc.Namespace
		for k, v := range pvc.Annotations {
			nameVars["pvc.annotations['"+k+"']"] = v
		}
	}
	name, err := expand(nameTpl, nameVars)
	if err != nil {
		return nil, fmt.Errorf("error resolving value %q: %v", nameTpl, err)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("%q resolved to %q which is not a valid secret name: %s", nameTpl, name, strings.Join(errs, "; "))
	}
	return &SecretRef{Name: name, Namespace: ns}, nil
}

// expand is os.Expand with an error for unknown tokens, as upstream's
// resolveTemplate.
func expand(tpl string, vars map[string]string) (string, error) {
	var missing []string
	out := os.Expand(tpl, func(k string) string {
		v, ok := vars[k]
		if !ok {
			missing = append(missing, k)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("invalid tokens: %q", missing)
	}
	return out, nil
}

// VolumeName is the CreateVolume name: <prefix>-<uid>; with uuidLength >= 0
// the dashes are removed and the uid truncated.
func VolumeName(prefix string, uid string, uuidLength int) string {
	if uuidLength < 0 {
		return prefix + "-" + uid
	}
	id := strings.ReplaceAll(uid, "-", "")
	if uuidLength < len(id) {
		id = id[:uuidLength]
	}
	return prefix + "-" + id
}

// AccessMode maps a PVC access mode like csi-lib-utils' accessmodes.
func AccessMode(m v1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) csi.VolumeCapability_AccessMode_Mode {
	switch m {
	case v1.ReadWriteOnce:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadWriteOncePod:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadOnlyMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	}
	return csi.VolumeCapability_AccessMode_UNKNOWN
}

// RequestOptions are the provisioner settings that shape a request.
type RequestOptions struct {
	VolumeNamePrefix      string
	VolumeNameUUIDLength  int
	DefaultFsType         string
	ExtraCreateMetadata   bool
	SingleNodeMultiWriter bool
}

// BuildCreateVolume is the CreateVolumeRequest for pvc (secrets left to the
// caller) and the fs type it used.
func BuildCreateVolume(pvc *v1.PersistentVolumeClaim, sc *storagev1.StorageClass, pvName string, o RequestOptions) (*csi.CreateVolumeRequest, string, error) {
	fsType, err := FsType(sc.Parameters, o.DefaultFsType)
	if err != nil {
		return nil, "", err
	}
	params, err := StripParameters(sc.Parameters)
	if err != nil {
		return nil, "", err
	}
	if o.ExtraCreateMetadata {
		params[ParamPVCName] = pvc.Name
		params[ParamPVCNamespace] = pvc.Namespace
		params[ParamPVName] = pvName
	}
	block := pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == v1.PersistentVolumeBlock
	var caps []*csi.VolumeCapability
	for _, m := range pvc.Spec.AccessModes {
		c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: AccessMode(m, o.SingleNodeMultiWriter)}}
		if block {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: sc.MountOptions}}
		}
		caps = append(caps, c)
	}
	req := &csi.CreateVolumeRequest{
		Name:               VolumeName(o.VolumeNamePrefix, string(pvc.UID), o.VolumeNameUUIDLength),
		VolumeCapabilities: caps,
		Parameters:         params,
	}
	if q, ok := pvc.Spec.Resources.Requests[v1.ResourceStorage]; ok {
		req.CapacityRange = &csi.CapacityRange{RequiredBytes: q.Value()}
	}
	if block {
		fsType = ""
	}
	return req, fsType, nil
}

// BuildPV is the PersistentVolume external-provisioner creates for a volume
// (claimRef, storage class, provisioned-by and the finalizer are the
// library's part).
func BuildPV(pvc *v1.PersistentVolumeClaim, sc *storagev1.StorageClass, pvName, driver, identity, fsType string, vol *csi.Volume, refs map[SecretType]*SecretRef) *v1.PersistentVolume {
	capacity := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	if vol.GetCapacityBytes() > 0 {
		capacity = *resource.NewQuantity(vol.GetCapacityBytes(), resource.BinarySI)
	}
	attrs := map[string]string{IdentityKey: identity}
	for k, v := range vol.GetVolumeContext() {
		attrs[k] = v
	}
	src := &v1.CSIPersistentVolumeSource{
		Driver:           driver,
		VolumeHandle:     vol.GetVolumeId(),
		VolumeAttributes: attrs,
		FSType:           fsType,
	}
	ref := func(t SecretType) *v1.SecretReference {
		if r := refs[t]; r != nil {
			return &v1.SecretReference{Name: r.Name, Namespace: r.Namespace}
		}
		return nil
	}
	src.ControllerPublishSecretRef = ref(ControllerPublishSecret)
	src.NodeStageSecretRef = ref(NodeStageSecret)
	src.NodePublishSecretRef = ref(NodePublishSecret)
	src.ControllerExpandSecretRef = ref(ControllerExpandSecret)
	src.NodeExpandSecretRef = ref(NodeExpandSecret)
	delName, delNs := "", ""
	if r := refs[ProvisionerSecret]; r != nil {
		delName, delNs = r.Name, r.Namespace
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: pvName,
			Annotations: map[string]string{
				AnnDeletionSecretName:      delName,
				AnnDeletionSecretNamespace: delNs,
			},
		},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:            pvc.Spec.AccessModes,
			MountOptions:           sc.MountOptions,
			Capacity:               v1.ResourceList{v1.ResourceStorage: capacity},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: src},
			VolumeMode:             pvc.Spec.VolumeMode,
		},
	}
	if sc.ReclaimPolicy != nil {
		pv.Spec.PersistentVolumeReclaimPolicy = *sc.ReclaimPolicy
	}
	return pv
}
