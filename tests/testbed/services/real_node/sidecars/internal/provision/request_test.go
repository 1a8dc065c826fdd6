package provision

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func claim() *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: "data", Namespace: "team-a", UID: "0a1b2c3d-1111-2222-3333-444455556666",
			Annotations: map[string]string{"s3.example/secret": "team-a-creds"},
		},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany, v1.ReadOnlyMany},
			Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("5Gi")}},
		},
	}
}

func TestStripParametersKeepsDriverKeysAndDropsKnownReservedOnes(t *testing.T) {
	got, err := StripParameters(map[string]string{
		"bucketName":                             "b",
		Prefix + "provisioner-secret-name":       "s",
		Prefix + "node-publish-secret-namespace": "ns",
		Prefix + "fstype":                        "ext4",
		"csiProvisionerSecretName":               "kept",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["bucketName"] != "b" || got["csiProvisionerSecretName"] != "kept" {
		t.Fatalf("got %v", got)
	}
}

func TestStripParametersRejectsUnknownReservedKeys(t *testing.T) {
	for _, k := range []string{Prefix + "bogus", Prefix + "controller-modify-secret-name", Prefix + "FSType"} {
		if _, err := StripParameters(map[string]string{k: "x"}); err == nil || !strings.Contains(err.Error(), "reserved namespace") {
			t.Errorf("%s: got %v, want a reserved-namespace error", k, err)
		}
	}
}

func TestFsType(t *testing.T) {
	if fs, _ := FsType(map[string]string{Prefix + "fstype": "xfs"}, "ext4"); fs != "xfs" {
		t.Errorf("prefixed: %q", fs)
	}
	if fs, _ := FsType(map[string]string{"FsType": "btrfs"}, "ext4"); fs != "btrfs" {
		t.Errorf("deprecated: %q", fs)
	}
	if fs, _ := FsType(nil, "ext4"); fs != "ext4" {
		t.Errorf("default: %q", fs)
	}
	if _, err := FsType(map[string]string{"fstype": "a", Prefix + "fstype": "b"}, ""); err == nil {
		t.Error("both keys: want an error")
	}
}

func TestResolveSecretRefTemplates(t *testing.T) {
	params := map[string]string{
		Prefix + "provisioner-secret-name":       "${pvc.annotations['s3.example/secret']}",
		Prefix + "provisioner-secret-namespace":  "${pvc.namespace}",
		Prefix + "node-publish-secret-name":      "${pv.name}-np",
		Prefix + "node-publish-secret-namespace": "fixed",
	}
	r, err := ResolveSecretRef(params, ProvisionerSecret, "pvc-x", claim())
	if err != nil || r == nil || r.Name != "team-a-creds" || r.Namespace != "team-a" {
		t.Fatalf("provisioner: %+v %v", r, err)
	}
	r, err = ResolveSecretRef(params, NodePublishSecret, "pvc-x", claim())
	if err != nil || r == nil || r.Name != "pvc-x-np" || r.Namespace != "fixed" {
		t.Fatalf("node-publish: %+v %v", r, err)
	}
	if r, err := ResolveSecretRef(params, NodeStageSecret, "pvc-x", claim()); r != nil || err != nil {
		t.Fatalf("node-stage: %+v %v", r, err)
	}
}

func TestResolveSecretRefGenericPairAppliesToEveryType(t *testing.T) {
	params := map[string]string{Prefix + "secret-name": "s", Prefix + "secret-namespace": "ns"}
	for _, ty := range SecretTypes {
		r, err := ResolveSecretRef(params, ty, "pvc-x", claim())
		if err != nil || r == nil || r.Name != "s" || r.Namespace != "ns" {
			t.Errorf("%s: %+v %v", ty, r, err)
		}
	}
}

func TestResolveSecretRefErrors(t *testing.T) {
	cases := map[string]map[string]string{
		"half a pair":             {Prefix + "provisioner-secret-name": "s"},
		"empty value":             {Prefix + "provisioner-secret-name": "", Prefix + "provisioner-secret-namespace": "ns"},
		"name token in namespace": {Prefix + "provisioner-secret-name": "s", Prefix + "provisioner-secret-namespace": "${pvc.name}"},
		"unknown token":           {Prefix + "provisioner-secret-name": "${pvc.uid}", Prefix + "provisioner-secret-namespace": "ns"},
		"not a DNS name":          {Prefix + "provisioner-secret-name": "Bad_Name", Prefix + "provisioner-secret-namespace": "ns"},
		"deprecated and new": {
			Prefix + "provisioner-secret-name": "a", Prefix + "provisioner-secret-namespace": "ns",
			"csiProvisionerSecretName": "b", "csiProvisionerSecretNamespace": "ns",
		},
	}
	for name, params := range cases {
		if r, err := ResolveSecretRef(params, ProvisionerSecret, "pvc-x", claim()); err == nil {
			t.Errorf("%s: got %+v, want an error", name, r)
		}
	}
}

func TestVolumeName(t *testing.T) {
	uid := "0a1b2c3d-1111-2222-3333-444455556666"
	if got := VolumeName("pvc", uid, -1); got != "pvc-"+uid {
		t.Errorf("full: %s", got)
	}
	if got := VolumeName("s3", uid, 8); got != "s3-0a1b2c3d" {
		t.Errorf("truncated: %s", got)
	}
}

func TestBuildCreateVolume(t *testing.T) {
	sc := &storagev1.StorageClass{
		Provisioner:  "s3.csi.scality.com",
		Parameters:   map[string]string{"bucketName": "b", Prefix + "provisioner-secret-name": "s", Prefix + "provisioner-secret-namespace": "ns"},
		MountOptions: []string{"allow-other"},
	}
	req, fs, err := BuildCreateVolume(claim(), sc, "pvc-x", RequestOptions{VolumeNamePrefix: "pvc", VolumeNameUUIDLength: -1, ExtraCreateMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if fs != "" || req.Name != "pvc-0a1b2c3d-1111-2222-3333-444455556666" || req.CapacityRange.RequiredBytes != 5<<30 {
		t.Fatalf("req %+v fs %q", req, fs)
	}
	want := map[string]string{"bucketName": "b", ParamPVCName: "data", ParamPVCNamespace: "team-a", ParamPVName: "pvc-x"}
	if len(req.Parameters) != len(want) {
		t.Fatalf("parameters %v", req.Parameters)
	}
	for k, v := range want {
		if req.Parameters[k] != v {
			t.Errorf("parameter %s = %q, want %q", k, req.Parameters[k], v)
		}
	}
	if len(req.VolumeCapabilities) != 2 ||
		req.VolumeCapabilities[0].GetAccessMode().GetMode() != csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER ||
		req.VolumeCapabilities[1].GetAccessMode().GetMode() != csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY ||
		req.VolumeCapabilities[0].GetMount().GetMountFlags()[0] != "allow-other" {
		t.Fatalf("capabilities %v", req.VolumeCapabilities)
	}
}

func TestAccessModeMapping(t *testing.T) {
	if AccessMode(v1.ReadWriteOnce, false) != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER ||
		AccessMode(v1.ReadWriteOnce, true) != csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER ||
		AccessMode(v1.ReadWriteOncePod, true) != csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER ||
		AccessMode(v1.ReadWriteOncePod, false) != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		t.Fatal("access mode mapping differs from csi-lib-utils")
	}
}

func TestBuildPV(t *testing.T) {
	retain := v1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{Provisioner: "s3.csi.scality.com", ReclaimPolicy: &retain, MountOptions: []string{"ro"}}
	vol := &csi.Volume{VolumeId: "bucket-1", VolumeContext: map[string]string{"bucketName": "bucket-1"}}
	refs := map[SecretType]*SecretRef{NodePublishSecret: {Name: "np", Namespace: "ns"}}
	pv := BuildPV(claim(), sc, "pvc-x", "s3.csi.scality.com", "1-2-s3.csi.scality.com", "", vol, refs)
	if pv.Name != "pvc-x" || pv.Spec.CSI.VolumeHandle != "bucket-1" || pv.Spec.CSI.FSType != "" {
		t.Fatalf("pv %+v", pv)
	}
	if pv.Annotations[AnnDeletionSecretName] != "" || pv.Annotations[AnnDeletionSecretNamespace] != "" {
		t.Errorf("deletion secret annotations must be present and empty: %v", pv.Annotations)
	}
	if _, ok := pv.Annotations[AnnDeletionSecretName]; !ok {
		t.Error("deletion secret name annotation missing")
	}
	if pv.Spec.CSI.VolumeAttributes[IdentityKey] != "1-2-s3.csi.scality.com" || pv.Spec.CSI.VolumeAttributes["bucketName"] != "bucket-1" {
		t.Errorf("attributes %v", pv.Spec.CSI.VolumeAttributes)
	}
	if pv.Spec.CSI.NodePublishSecretRef == nil || pv.Spec.CSI.NodePublishSecretRef.Name != "np" || pv.Spec.CSI.NodeStageSecretRef != nil {
		t.Errorf("secret refs %+v", pv.Spec.CSI)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != retain || pv.Spec.MountOptions[0] != "ro" {
		t.Errorf("spec %+v", pv.Spec)
	}
	if q := pv.Spec.Capacity[v1.ResourceStorage]; q.String() != "5Gi" {
		t.Errorf("capacity %s (want the request when the driver reports none)", q.String())
	}
	vol.CapacityBytes = 10 << 30
	pv = BuildPV(claim(), sc, "pvc-x", "d", "i", "", vol, nil)
	if q := pv.Spec.Capacity[v1.ResourceStorage]; q.String() != "10Gi" {
		t.Errorf("capacity %s", q.String())
	}
}
