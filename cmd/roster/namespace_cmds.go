package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
)

// namespacesCmd is `roster namespaces`: the list, with create, update and delete.
func (a *app) namespacesCmd() *cobra.Command {
	var consistency string
	cmd := &cobra.Command{
		Use:   "namespaces",
		Short: "List namespaces; create, update or delete one",
		Long: "List the namespaces the token may read (the outermost layer of the model; \"public\"\n" +
			"always exists), or create, update or delete one. Creating, updating and deleting need\n" +
			"operator: write on a cluster with ACLs.",
		Example: "  roster namespaces\n" +
			"  roster namespaces create staging --name Staging --description 'pre-production'\n" +
			"  roster namespaces update staging --description 'pre-production, EU'\n" +
			"  roster namespaces delete staging",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, _, err := a.client().Namespaces(ctxOf(cmd), client.QueryOptions{Consistency: consistency})
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				return writeJSON(a.stdout, res)
			}
			t := newTable(a.stdout, "ID", "NAME", "DESCRIPTION", "MODIFY_INDEX")
			for _, ns := range res.Namespaces {
				t.row(ns.ID, orDash(ns.Name), orDash(ns.Description), strconv.FormatUint(ns.ModifyIndex, 10))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&consistency, "consistency", "", "read consistency: linearizable (default), leader or stale")
	a.clientFlags(cmd)
	cmd.AddCommand(a.namespaceCreateCmd(), a.namespaceUpdateCmd(), a.namespaceDeleteCmd())
	return cmd
}

// namespaceID checks the ID argument of the namespace commands.
func namespaceID(cmd *cobra.Command, id string) error {
	if strings.TrimSpace(id) == "" {
		return usagef("usage: %s: ID must not be empty", cmd.UseLine())
	}
	return nil
}

func (a *app) namespaceCreateCmd() *cobra.Command {
	var name, description string
	cmd := &cobra.Command{
		Use:   "create ID",
		Short: "Create a namespace (an error if it exists)",
		Long: "Create namespace ID with a display name (--name, default the id) and a description.\n" +
			"A namespace that exists already is left as it is and the command fails: change it\n" +
			"with `roster namespaces update`.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := namespaceID(cmd, id); err != nil {
				return err
			}
			ctx := ctxOf(cmd)
			c := a.client()
			if _, _, err := c.Namespace(ctx, id, client.QueryOptions{}); err == nil {
				return fmt.Errorf("namespace %s exists already (change it with roster namespaces update)", safeText(id))
			} else if !client.IsNotFound(err) {
				return err
			}
			idx, err := c.UpsertNamespace(ctx, id, api.NamespaceRequest{Name: name, Description: description})
			if err != nil {
				return err
			}
			return a.printWrite(api.WriteResult{Index: idx}, "created namespace %s", safeText(id))
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "display name (default the id)")
	cmd.Flags().StringVar(&description, "description", "", "description")
	a.clientFlags(cmd)
	return cmd
}

func (a *app) namespaceUpdateCmd() *cobra.Command {
	var name, description string
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change a namespace's display name or description",
		Long: "Change the display name (--name) or the description (--description) of namespace ID;\n" +
			"what is not given keeps its value. An empty --name resets the name to the id.",
		Example: "  roster namespaces update staging --description ''",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := namespaceID(cmd, id); err != nil {
				return err
			}
			fs := cmd.Flags()
			if !fs.Changed("name") && !fs.Changed("description") {
				return usagef("nothing to change: give --name or --description")
			}
			ctx := ctxOf(cmd)
			c := a.client()
			cur, _, err := c.Namespace(ctx, id, client.QueryOptions{})
			if err != nil {
				return err
			}
			req := api.NamespaceRequest{Name: cur.Namespace.Name, Description: cur.Namespace.Description}
			if fs.Changed("name") {
				req.Name = name
			}
			if fs.Changed("description") {
				req.Description = description
			}
			idx, err := c.UpsertNamespace(ctx, id, req)
			if err != nil {
				return err
			}
			return a.printWrite(api.WriteResult{Index: idx}, "updated namespace %s", safeText(id))
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "new display name (empty: the id)")
	cmd.Flags().StringVar(&description, "description", "", "new description (empty: none)")
	a.clientFlags(cmd)
	return cmd
}

func (a *app) namespaceDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete an empty namespace",
		Long: "Delete namespace ID. A namespace that still has services, and \"public\", cannot be\n" +
			"deleted (the command fails with the server's conflict).",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := namespaceID(cmd, id); err != nil {
				return err
			}
			idx, err := a.client().DeleteNamespace(ctxOf(cmd), id)
			if err != nil {
				return err
			}
			return a.printWrite(api.WriteResult{Index: idx}, "deleted namespace %s", safeText(id))
		},
	}
	a.clientFlags(cmd)
	return cmd
}
