// Command terraform-provider-ipam serves the IPAM Terraform provider.
package main

import (
	"flag"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/overlayipam/terraform-provider-ipam/internal/provider"
)

// version and commit are set by the release build (goreleaser ldflags).
var (
	version = "dev"
	commit  = ""
)

// quietSDK keeps the plugin SDKs' own trace logging (every gRPC call and
// framework step, written as JSON to stderr for terraform to discard) off
// unless someone asked for logs: it costs a quarter of the provider's CPU.
// TF_LOG, or any TF_LOG_SDK* variable, turns it back on as usual.
func quietSDK() {
	if os.Getenv("TF_LOG") != "" || os.Getenv("TF_LOG_PROVIDER") != "" {
		return
	}
	for _, v := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"} {
		if _, set := os.LookupEnv(v); !set {
			_ = os.Setenv(v, "WARN")
		}
	}
}

func main() {
	quietSDK()
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	server, err := provider.NewServer(versionString())()
	if err != nil {
		log.Fatal(err.Error())
	}
	var opts []tf6server.ServeOpt
	if debug {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	err = tf6server.Serve("registry.terraform.io/overlayipam/ipam", func() tfprotov6.ProviderServer { return server }, opts...)
	if err != nil {
		log.Fatal(err.Error())
	}
}

func versionString() string {
	if commit == "" {
		return version
	}
	return version + "+" + commit
}
