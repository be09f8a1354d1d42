// Command terraform-provider-ipam serves the IPAM Terraform provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/overlayipam/terraform-provider-ipam/internal/provider"
)

// version and commit are set by the release build (goreleaser ldflags).
var (
	version = "dev"
	commit  = ""
)

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	err := providerserver.Serve(context.Background(), provider.New(versionString()), providerserver.ServeOpts{
		Address: "registry.terraform.io/overlayipam/ipam",
		Debug:   debug,
	})
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
