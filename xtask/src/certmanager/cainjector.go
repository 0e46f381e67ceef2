// The cert-manager cainjector: its default configuration, a few flags, and a controller-runtime
// manager running cert-manager's injectors (pkg/controller/cainjector). Secrets are read
// directly, not cached, as upstream does.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/cert-manager/cert-manager/internal/apis/config/cainjector"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/cainjector/scheme"
	"github.com/cert-manager/cert-manager/internal/apis/config/cainjector/validation"
	"github.com/cert-manager/cert-manager/internal/cmd/util"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/cainjector/v1alpha1"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	cmutil "github.com/cert-manager/cert-manager/pkg/util"
)

func main() {
	ctx, exit := util.SetupExitHandler(context.Background(), util.GracefulShutdown)
	defer exit()
	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)
	ctx = logf.NewContext(ctx, logf.Log, "cainjector")
	if err := run(ctx); err != nil && !errors.Is(err, pflag.ErrHelp) {
		logf.Log.Error(err, "cainjector failed")
		util.SetExitCode(err)
	}
}

func run(ctx context.Context) error {
	cfgScheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return err
	}
	versioned := &configv1alpha1.CAInjectorConfiguration{}
	cfgScheme.Default(versioned)
	cfg := &config.CAInjectorConfiguration{}
	if err := cfgScheme.Convert(versioned, cfg, nil); err != nil {
		return err
	}
	fs := pflag.NewFlagSet("cainjector", pflag.ContinueOnError)
	fs.BoolVar(&cfg.LeaderElectionConfig.Enabled, "leader-elect", cfg.LeaderElectionConfig.Enabled, "leader election")
	fs.StringVar(&cfg.LeaderElectionConfig.Namespace, "leader-election-namespace", cfg.LeaderElectionConfig.Namespace, "namespace of the leader election Lease")
	fs.StringVar(&cfg.MetricsListenAddress, "metrics-listen-address", cfg.MetricsListenAddress, "metrics address (0: off)")
	logf.AddFlags(&cfg.Logging, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if errs := validation.ValidateCAInjectorConfiguration(cfg, nil); len(errs) > 0 {
		return fmt.Errorf("invalid flags: %w", errs.ToAggregate())
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return err
	}

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cmutil.RestConfigWithUserAgent(restConfig, "cainjector"), ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cache.Options{ReaderFailOnMissingInformer: true},
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                cfg.LeaderElectionConfig.Enabled,
		LeaderElectionNamespace:       cfg.LeaderElectionConfig.Namespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &cfg.LeaderElectionConfig.LeaseDuration,
		RenewDeadline:                 &cfg.LeaderElectionConfig.RenewDeadline,
		RetryPeriod:                   &cfg.LeaderElectionConfig.RetryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsListenAddress},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    cfg.Namespace,
		IgnoreNamespaces:             cfg.IgnoreNamespaces,
		EnableCertificatesDataSource: cfg.EnableDataSourceConfig.Certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   cfg.EnableInjectableConfig.MutatingWebhookConfigurations,
			cainjector.ValidatingWebhookConfigurationName: cfg.EnableInjectableConfig.ValidatingWebhookConfigurations,
			cainjector.APIServiceName:                     cfg.EnableInjectableConfig.APIServices,
			cainjector.CustomResourceDefinitionName:       cfg.EnableInjectableConfig.CustomResourceDefinitions,
		},
	})
	if err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	return mgr.Start(ctx)
}
