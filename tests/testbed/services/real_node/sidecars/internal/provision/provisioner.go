package provision

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrs "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"

	"s3csi.test/real_node/sidecars/internal/csiconn"
)

// CSIProvisioner is a controller.Provisioner calling a CSI Controller service.
type CSIProvisioner struct {
	Client   kubernetes.Interface
	Conn     *grpc.ClientConn
	Driver   string
	Identity string
	Timeout  time.Duration
	Caps     csiconn.Capabilities
	Options  RequestOptions
}

var _ controller.Provisioner = (*CSIProvisioner)(nil)

// NewIdentity is external-provisioner's identity: <ms epoch>-<0..9999>-<driver>.
func NewIdentity(driver string) string {
	return strconv.FormatInt(time.Now().UnixNano()/int64(time.Millisecond), 10) + "-" + strconv.Itoa(rand.Intn(10000)) + "-" + driver
}

func (p *CSIProvisioner) checkCapabilities() error {
	if !p.Caps.ControllerService {
		return errors.New("CSI driver does not support dynamic provisioning: plugin CONTROLLER_SERVICE capability is not reported")
	}
	if !p.Caps.CreateDeleteVolume {
		return errors.New("CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported")
	}
	return nil
}

// state maps a CreateVolume error like upstream's checkError.
func state(err error) controller.ProvisioningState {
	st, ok := status.FromError(err)
	if !ok {
		return controller.ProvisioningInBackground
	}
	switch st.Code() {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Aborted:
		return controller.ProvisioningInBackground
	}
	return controller.ProvisioningFinished
}

// Provision creates the volume and returns its PV.
func (p *CSIProvisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if err := p.checkCapabilities(); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if o.StorageClass == nil {
		return nil, controller.ProvisioningFinished, errors.New("storage class was nil")
	}
	if o.PVC.Spec.Selector != nil {
		return nil, controller.ProvisioningFinished, errors.New("claim Selector is not supported")
	}
	if o.PVC.Spec.DataSource != nil || o.PVC.Spec.DataSourceRef != nil {
		return nil, controller.ProvisioningFinished, errors.New("volume content sources (snapshots, clones, populators) are not supported by this stand-in")
	}
	opts := p.Options
	opts.SingleNodeMultiWriter = p.Caps.SingleNodeMultiWriter
	req, fsType, err := BuildCreateVolume(o.PVC, o.StorageClass, o.PVName, opts)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	refs := map[SecretType]*SecretRef{}
	for _, t := range SecretTypes {
		r, err := ResolveSecretRef(o.StorageClass.Parameters, t, o.PVName, o.PVC)
		if err != nil {
			return nil, controller.ProvisioningNoChange, err
		}
		refs[t] = r
	}
	if r := refs[ProvisionerSecret]; r != nil {
		data, err := p.secretData(ctx, r)
		if err != nil {
			return nil, controller.ProvisioningNoChange, err
		}
		req.Secrets = data
	}
	cctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	rsp, err := csi.NewControllerClient(p.Conn).CreateVolume(cctx, req)
	if err != nil {
		return nil, state(err), err
	}
	vol := rsp.GetVolume()
	if vol == nil {
		return nil, controller.ProvisioningInBackground, errors.New("CreateVolume returned no volume")
	}
	if req.CapacityRange != nil && vol.GetCapacityBytes() > 0 && vol.GetCapacityBytes() < req.CapacityRange.RequiredBytes {
		// Too small: delete it again (a few tries within one timeout), as upstream.
		derr := p.deleteVolume(ctx, vol.GetVolumeId(), req.Secrets)
		if derr != nil {
			return nil, controller.ProvisioningInBackground, fmt.Errorf("created volume capacity %d is less than the requested %d; deleting it failed: %v", vol.GetCapacityBytes(), req.CapacityRange.RequiredBytes, derr)
		}
		return nil, controller.ProvisioningFinished, fmt.Errorf("created volume capacity %d is less than the requested %d", vol.GetCapacityBytes(), req.CapacityRange.RequiredBytes)
	}
	klog.V(2).Infof("Created volume %q for claim %s/%s", vol.GetVolumeId(), o.PVC.Namespace, o.PVC.Name)
	pv := BuildPV(o.PVC, o.StorageClass, o.PVName, p.Driver, p.Identity, fsType, vol, refs)
	return pv, controller.ProvisioningFinished, nil
}

func (p *CSIProvisioner) secretData(ctx context.Context, r *SecretRef) (map[string]string, error) {
	s, err := p.Client.CoreV1().Secrets(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to get secret %s/%s: %v", r.Namespace, r.Name, err)
	}
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

func (p *CSIProvisioner) deleteVolume(ctx context.Context, id string, secrets map[string]string) error {
	cctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	_, err := csi.NewControllerClient(p.Conn).DeleteVolume(cctx, &csi.DeleteVolumeRequest{VolumeId: id, Secrets: secrets})
	return err
}

// Delete deletes the volume behind a released PV (the library deletes the PV
// object and its finalizer afterwards).
func (p *CSIProvisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv == nil || pv.Spec.CSI == nil {
		return errors.New("invalid CSI PV")
	}
	if err := p.checkCapabilities(); err != nil {
		return err
	}
	secrets, err := p.deletionSecrets(ctx, pv)
	if err != nil {
		return err
	}
	return p.deleteVolume(ctx, pv.Spec.CSI.VolumeHandle, secrets)
}

// deletionSecrets follows upstream's handleSecretsForDeletion: the PV's
// deletion-secret annotations first, else the StorageClass with a PVC stub.
func (p *CSIProvisioner) deletionSecrets(ctx context.Context, pv *v1.PersistentVolume) (map[string]string, error) {
	name, hasName := pv.Annotations[AnnDeletionSecretName]
	ns, hasNs := pv.Annotations[AnnDeletionSecretNamespace]
	if hasName && hasNs {
		if name == "" && ns == "" {
			return nil, nil
		}
		data, err := p.secretData(ctx, &SecretRef{Name: name, Namespace: ns})
		if err != nil {
			klog.Warningf("Deleting volume %s without secrets: %v", pv.Name, err)
			return nil, nil
		}
		return data, nil
	}
	if pv.Spec.StorageClassName == "" || pv.Spec.ClaimRef == nil {
		return nil, nil
	}
	sc, err := p.Client.StorageV1().StorageClasses().Get(ctx, pv.Spec.StorageClassName, metav1.GetOptions{})
	if apierrs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	stub := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: pv.Spec.ClaimRef.Name, Namespace: pv.Spec.ClaimRef.Namespace}}
	ref, err := ResolveSecretRef(sc.Parameters, ProvisionerSecret, pv.Name, stub)
	if err != nil || ref == nil {
		return nil, err
	}
	return p.secretData(ctx, ref)
}
