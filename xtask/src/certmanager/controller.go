// The cert-manager controller: the controllers cert-manager enables by default (the Venafi
// issuer left out: the module proxy does not serve github.com/Venafi/vcert/v5), each started
// once this process holds the leader election Lease, with a /livez server for the kubelet.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/cert-manager/cert-manager/internal/cmd/util"
	"github.com/cert-manager/cert-manager/pkg/controller"
	challenges "github.com/cert-manager/cert-manager/pkg/controller/acmechallenges"
	orders "github.com/cert-manager/cert-manager/pkg/controller/acmeorders"
	ingressshim "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/ingresses"
	cracme "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/acme"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	crvault "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/vault"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	certmetrics "github.com/cert-manager/cert-manager/pkg/controller/certificates/metrics"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	dnsutil "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	cmutil "github.com/cert-manager/cert-manager/pkg/util"

	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/vault"
)

// What cert-manager enables by default, less the Venafi issuer.
var enabled = []string{
	issuers.ControllerName, clusterissuers.ControllerName, certmetrics.ControllerName,
	ingressshim.ControllerName, orders.ControllerName, challenges.ControllerName,
	cracme.CRControllerName, crapprover.ControllerName, crca.CRControllerName,
	crselfsigned.CRControllerName, crvault.CRControllerName,
	trigger.ControllerName, issuing.ControllerName, keymanager.ControllerName,
	requestmanager.ControllerName, readiness.ControllerName, revisionmanager.ControllerName,
}

func main() {
	ctx, exit := util.SetupExitHandler(context.Background(), util.GracefulShutdown)
	defer exit()
	logf.InitLogs()
	defer logf.FlushLogs()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx); err != nil && !errors.Is(err, pflag.ErrHelp) {
		logf.Log.Error(err, "controller failed")
		util.SetExitCode(err)
	}
}

func run(rootCtx context.Context) error {
	clusterResourceNamespace, leaderElectionNamespace := "kube-system", "kube-system"
	healthzAddress, workers := "0.0.0.0:9403", 5
	logging := logsapi.NewLoggingConfiguration()
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	fs.StringVar(&clusterResourceNamespace, "cluster-resource-namespace", clusterResourceNamespace, "namespace of ClusterIssuers' Secrets")
	fs.StringVar(&leaderElectionNamespace, "leader-election-namespace", leaderElectionNamespace, "namespace of the leader election Lease")
	fs.StringVar(&healthzAddress, "internal-healthz-listen-address", healthzAddress, "address of the /livez server")
	fs.IntVar(&workers, "concurrent-workers", workers, "workers per controller")
	logf.AddFlags(logging, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if err := logf.ValidateAndApply(logging); err != nil {
		return err
	}
	log := logf.FromContext(rootCtx)
	log.Info("starting cert-manager controller", "version", cmutil.AppVersion)

	// cert-manager's defaults (internal/apis/config/controller/v1alpha1/defaults.go).
	factory, err := controller.NewContextFactory(rootCtx, controller.ContextOptions{
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        clusterResourceNamespace,
			ClusterIssuerAmbientCredentials: true,
		},
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverImage:                 "quay.io/jetstack/cert-manager-acmesolver:" + cmutil.AppVersion,
			HTTP01SolverResourceRequestCPU:    resource.MustParse("10m"),
			HTTP01SolverResourceRequestMemory: resource.MustParse("64Mi"),
			HTTP01SolverResourceLimitsCPU:     resource.MustParse("100m"),
			HTTP01SolverResourceLimitsMemory:  resource.MustParse("64Mi"),
			ACMEHTTP01SolverRunAsNonRoot:      true,
			DNS01Nameservers:                  dnsutil.RecursiveNameservers,
			DNS01CheckRetryPeriod:             10 * time.Second,
			DNS01CheckAuthoritative:           true,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerKind:                 "Issuer",
			DefaultIssuerGroup:                "cert-manager.io",
			DefaultAutoCertificateAnnotations: []string{"kubernetes.io/tls-acme"},
			GatewayAPIExtraProtocols:          sets.New[string](),
		},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: 60},
	})
	if err != nil {
		return err
	}
	cmctx, err := factory.Build()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(rootCtx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)

	var lc net.ListenConfig
	healthzListener, err := lc.Listen(ctx, "tcp", healthzAddress)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", healthzAddress, err)
	}
	healthzServer := healthz.NewServer(20 * time.Second)
	g.Go(func() error { return healthzServer.Start(ctx, healthzListener) })

	elected := make(chan struct{})
	g.Go(func() error {
		return lead(ctx, factory, leaderElectionNamespace, healthzServer.LeaderHealthzAdaptor, elected)
	})
	select {
	case <-ctx.Done():
		return g.Wait()
	case <-elected:
	}

	known := controller.Known()
	for _, name := range enabled {
		constructor, ok := known[name]
		if !ok {
			return fmt.Errorf("controller %s is not registered", name)
		}
		iface, err := constructor(factory)
		if err != nil {
			cancel()
			return fmt.Errorf("starting controller %s: %w (%v)", name, err, g.Wait())
		}
		g.Go(func() error {
			log.V(logf.InfoLevel).Info("starting controller", "controller", name)
			return iface.Run(workers, ctx)
		})
	}
	cmctx.SharedInformerFactory.Start(ctx.Done())
	cmctx.KubeSharedInformerFactory.Start(ctx.Done())
	cmctx.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	return g.Wait()
}

// lead holds the Lease "cert-manager-controller" (as upstream names it), closes elected once it
// does, and fails when it is lost, so that the kubelet restarts a former leader.
func lead(ctx context.Context, factory *controller.ContextFactory, namespace string, watchdog *leaderelection.HealthzAdaptor, elected chan struct{}) error {
	cmctx, err := factory.Build("leader-election")
	if err != nil {
		return err
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	lock, err := resourcelock.NewWithLabels(resourcelock.LeasesResourceLock, namespace, "cert-manager-controller",
		cmctx.Client.CoreV1(), cmctx.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id + "-external-cert-manager-controller", EventRecorder: cmctx.Recorder},
		map[string]string{"app.kubernetes.io/managed-by": "cert-manager"})
	if err != nil {
		return err
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   60 * time.Second,
		RenewDeadline:   40 * time.Second,
		RetryPeriod:     15 * time.Second,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return err
	}
	// Run returns when ctx ends, or when the Lease could not be renewed.
	elector.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("leader election lost")
}
