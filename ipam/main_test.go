package ipam_test

import (
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// exampleURL is a database of its own for the examples.
var exampleURL string

func TestMain(m *testing.M) { testdb.Main(m, "ipam", &exampleURL) }
