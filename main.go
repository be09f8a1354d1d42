// Command terraform-provider-ipam serves the IPAM Terraform provider.
package main

import (
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/overlayipam/terraform-provider-ipam/internal/provider"
)

// version and commit are set by the release build (goreleaser ldflags).
var (
	version = "dev"
	commit  = ""
)

func main() {
	provider.ProcessDefaults()
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
	provider.CloseClients()
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
