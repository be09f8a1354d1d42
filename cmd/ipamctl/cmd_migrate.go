package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

func (a *app) migrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply or inspect the database schema migrations",
		Long: `The schema migrations are embedded in ipamctl, as in the provider. Run 'migrate up' as the
schema owner when the provider runs with auto_migrate = false.`,
		Example: `  ipamctl migrate status
  ipamctl migrate up`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return badUsage("migrate needs a subcommand: up or status")
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "up",
		Short:   "Apply the pending migrations",
		Long:    "Applies every pending migration, each in its own transaction. Several runs at once are serialized; a database newer than this binary is refused.",
		Example: "  ipamctl migrate up --database-url 'postgres://owner@db.example/ipam'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.open(cmd.Context(), false)
			if err != nil {
				return err
			}
			after, err := st.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(a.out, migrateOutcome(after, st.Addr()))
			return nil
		},
	})
	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the schema version of the database and the one this ipamctl needs",
		Long: "Shows the schema version without changing anything. Exits 0 when the database is at this binary's version, " +
			"4 when migrations are pending (run 'ipamctl migrate up'), 1 when the database is newer than this binary. " +
			"--json prints {\"database\", \"current\", \"latest\", \"pending\"} (pending: migrations to apply; negative when the database is newer).",
		Example: "  ipamctl migrate status\n  ipamctl migrate status --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.open(cmd.Context(), false)
			if err != nil {
				return err
			}
			s, err := st.SchemaStatus(cmd.Context())
			if err != nil {
				return err
			}
			newer := fmt.Errorf("the database schema (version %d) is newer than this ipamctl knows (%d): upgrade ipamctl", s.Current, s.Latest)
			pending := &codedError{code: exitPending, err: fmt.Errorf("%d migration(s) pending: run 'ipamctl migrate up'", s.Latest-s.Current)}
			if asJSON {
				b, err := json.Marshal(struct {
					Database string `json:"database"`
					Current  int64  `json:"current"`
					Latest   int64  `json:"latest"`
					Pending  int64  `json:"pending"`
				}{st.Addr(), int64(s.Current), int64(s.Latest), int64(s.Latest) - int64(s.Current)})
				if err != nil {
					return err
				}
				fmt.Fprintf(a.out, "%s\n", b)
				switch {
				case s.Current > s.Latest:
					return newer
				case s.Current < s.Latest:
					return pending
				}
				return nil
			}
			fmt.Fprintf(a.out, "database %s: schema version %d; this ipamctl needs version %d\n", st.Addr(), s.Current, s.Latest)
			switch {
			case s.Current == s.Latest:
				fmt.Fprintln(a.out, "up to date")
			case s.Current < s.Latest:
				return pending
			default:
				return newer
			}
			return nil
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON object")
	cmd.AddCommand(status)
	return cmd
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version of ipamctl",
		Example: "  ipamctl version",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if commit == "" {
				fmt.Fprintf(a.out, "ipamctl %s\n", version)
				return nil
			}
			fmt.Fprintf(a.out, "ipamctl %s (commit %s)\n", version, commit)
			return nil
		},
	}
}

// migrateOutcome says what a migrate up did: migrations from several
// processes at once take turns, so each says what it applied, and when
// another process applied some meanwhile.
func migrateOutcome(st ipam.SchemaStatus, addr string) string {
	switch {
	case st.Applied == 0 && st.Found == st.Current:
		return fmt.Sprintf("schema is up to date at version %d (%s)", st.Current, addr)
	case st.Applied == 0:
		return fmt.Sprintf("schema is at version %d (%s): another process migrated it from version %d meanwhile; this run applied none", st.Current, addr, st.Found)
	case st.Applied == st.Current-st.Found:
		return fmt.Sprintf("schema migrated from version %d to %d (%s)", st.Found, st.Current, addr)
	}
	return fmt.Sprintf("schema migrated from version %d to %d (%s): this run applied %d of the %d migrations, another process at the same time the others",
		st.Found, st.Current, addr, st.Applied, st.Current-st.Found)
}
