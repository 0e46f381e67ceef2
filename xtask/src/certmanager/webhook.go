// The cert-manager webhook: its own configuration and flags (pkg/webhook/options), its server
// (internal/webhook). Configuration files are not supported: flags only.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/cert-manager/cert-manager/internal/apis/config/webhook/validation"
	"github.com/cert-manager/cert-manager/internal/cmd/util"
	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	ctx, exit := util.SetupExitHandler(context.Background(), util.GracefulShutdown)
	defer exit()
	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)
	ctx = logf.NewContext(ctx, logf.Log, "webhook")
	if err := run(ctx); err != nil && !errors.Is(err, pflag.ErrHelp) {
		logf.Log.Error(err, "webhook failed")
		util.SetExitCode(err)
	}
}

func run(ctx context.Context) error {
	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	options.AddConfigFlags(fs, cfg)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
		return err
	}
	if errs := validation.ValidateWebhookConfiguration(cfg, nil); len(errs) > 0 {
		return fmt.Errorf("invalid flags: %w", errs.ToAggregate())
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return err
	}
	srv, err := cmwebhook.NewCertManagerWebhookServer(logf.FromContext(ctx), *cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
