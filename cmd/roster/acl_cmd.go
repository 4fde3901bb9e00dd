package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
)

// aclCmd is `roster acl`: bootstrap and token management.
func (a *app) aclCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Bootstrap access control and manage tokens",
		Long: "A cluster whose nodes run with --acl-enabled answers only requests that carry a token\n" +
			"(--token or ROSTER_TOKEN). `roster acl bootstrap` creates the first, management token,\n" +
			"once per cluster; `roster acl token` creates, lists and deletes the others.",
	}
	token := &cobra.Command{Use: "token", Short: "Create, list, read and delete ACL tokens"}
	token.AddCommand(a.aclTokenCreateCmd(), a.aclTokenListCmd(), a.aclTokenReadCmd(), a.aclTokenSelfCmd(), a.aclTokenDeleteCmd())
	cmd.AddCommand(a.aclBootstrapCmd(), token)
	return cmd
}

func (a *app) aclBootstrapCmd() *cobra.Command {
	var secretFile string
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Create the cluster's first, management token (once per cluster)",
		Long: "Create the management token of a cluster whose nodes run with --acl-enabled. It works\n" +
			"once: keep the secret it prints somewhere safe, it is shown nowhere else. With\n" +
			"--secret-file the token's secret is the UUID in that file (prepared by automation)\n" +
			"instead of one the cluster draws, and the command may be repeated: when the cluster\n" +
			"is already bootstrapped and that secret is a management token, it exits 0. The secret\n" +
			"of a file is never printed.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var secret string
			if secretFile != "" {
				b, err := os.ReadFile(secretFile)
				if err != nil {
					return fmt.Errorf("--secret-file: %w", err)
				}
				secret = strings.TrimSpace(string(b))
			}
			ctx := ctxOf(cmd)
			t, err := a.client().ACLBootstrapWith(ctx, secret)
			if err != nil && secret != "" && client.IsConflict(err) {
				// Repeated by automation (a compose one-shot, a provisioning run): done
				// already when the file's secret is the cluster's management token.
				self, serr := client.New(a.addr, client.WithTimeout(a.timeout), client.WithToken(secret),
					client.WithTLSConfig(a.tlsConfig)).TokenSelf(ctx)
				if serr == nil && self.Management {
					fmt.Fprintf(a.stderr, "already bootstrapped: the secret in %s is management token %s\n", secretFile, self.AccessorID)
					return nil
				}
				return err
			}
			if err != nil {
				return err
			}
			if secretFile != "" {
				// The secret is in the file already: keep it out of logs and terminals.
				t.SecretID = ""
				fmt.Fprintf(a.stderr, "bootstrapped: the management token's secret is the one in %s\n", secretFile)
			}
			return a.printTokens(secretFile == "", t)
		},
	}
	cmd.Flags().StringVar(&secretFile, "secret-file", "", "file holding the secret to give the management token (a UUID)")
	a.clientFlags(cmd)
	return cmd
}

func (a *app) aclTokenCreateCmd() *cobra.Command {
	var (
		description, rulesJSON, operator, aclLevel string
		namespaces                                 []string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a token (needs acl: write)",
		Long: "Create a token with rules: --namespace NS=LEVEL (repeatable; NS may be *, the most\n" +
			"specific key wins), --operator LEVEL and --acl LEVEL, each LEVEL none, read or write;\n" +
			"or the whole rules as JSON with --rules. The secret is printed once.",
		Example: "  roster acl token create --description 'deploy bot' --namespace public=write --namespace '*=read' --operator read\n" +
			"  roster acl token create --rules '{\"namespaces\":{\"public\":\"write\"},\"operator\":\"read\"}'",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rules api.ACLRules
			if rulesJSON != "" {
				if len(namespaces) > 0 || operator != "" || aclLevel != "" {
					return usagef("--rules replaces --namespace, --operator and --acl: give one or the other")
				}
				dec := json.NewDecoder(strings.NewReader(rulesJSON))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&rules); err != nil {
					return usagef("--rules: %v", err)
				}
			} else {
				rules = api.ACLRules{Operator: operator, ACL: aclLevel}
				for _, kv := range namespaces {
					ns, level, ok := strings.Cut(kv, "=")
					if !ok || ns == "" {
						return usagef("--namespace %q: want NS=LEVEL such as public=write or '*=read'", kv)
					}
					if rules.Namespaces == nil {
						rules.Namespaces = map[string]string{}
					}
					if _, dup := rules.Namespaces[ns]; dup {
						return usagef("--namespace: %q is given twice", ns)
					}
					rules.Namespaces[ns] = level
				}
			}
			t, err := a.client().CreateToken(ctxOf(cmd), api.ACLTokenRequest{Description: description, Rules: rules})
			if err != nil {
				return err
			}
			return a.printTokens(true, t)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&description, "description", "", "what the token is for")
	fs.StringArrayVar(&namespaces, "namespace", nil, "NS=LEVEL: access to a namespace's services and instances (repeatable; NS may be *)")
	fs.StringVar(&operator, "operator", "", "access to operator actions: none, read or write")
	fs.StringVar(&aclLevel, "acl", "", "access to ACL management: none, read or write")
	fs.StringVar(&rulesJSON, "rules", "", `the rules as JSON: {"namespaces":{"public":"write"},"operator":"read","acl":"none"}`)
	a.clientFlags(cmd)
	return cmd
}

func (a *app) aclTokenListCmd() *cobra.Command {
	var consistency string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tokens, without secrets (needs acl: read)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, _, err := a.client().Tokens(ctxOf(cmd), client.QueryOptions{Consistency: consistency})
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				return writeJSON(a.stdout, res)
			}
			return a.printTokens(false, res.Tokens...)
		},
	}
	cmd.Flags().StringVar(&consistency, "consistency", "", "read consistency: linearizable (default), leader or stale")
	a.clientFlags(cmd)
	return cmd
}

func (a *app) aclTokenReadCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "read ACCESSOR_ID",
		Short: "Show one token, without its secret (needs acl: read)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, _, err := a.client().Token(ctxOf(cmd), args[0], client.QueryOptions{})
			if err != nil {
				return err
			}
			return a.printTokens(false, t)
		},
	}
	a.clientFlags(cmd)
	return cmd
}

func (a *app) aclTokenSelfCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "self",
		Short: "Show the token given with --token (or ROSTER_TOKEN)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := a.client().TokenSelf(ctxOf(cmd))
			if err != nil {
				return err
			}
			return a.printTokens(false, t)
		},
	}
	a.clientFlags(cmd)
	return cmd
}

func (a *app) aclTokenDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete ACCESSOR_ID",
		Short: "Delete a token (needs acl: write and the token's rights within yours; never the last management token); every node refuses it once the deletion is applied",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			idx, err := a.client().DeleteToken(ctxOf(cmd), args[0])
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				return writeJSON(a.stdout, api.WriteResult{Index: idx})
			}
			_, err = fmt.Fprintf(a.stdout, "deleted token %s (index %d)\n", safeText(args[0]), idx)
			return err
		},
	}
	a.clientFlags(cmd)
	return cmd
}

// printTokens prints tokens as a table (with the secret column when withSecret) or, with
// -o json, one token as an object and several as an array.
func (a *app) printTokens(withSecret bool, tokens ...api.ACLToken) error {
	if a.output == outputJSON {
		if len(tokens) == 1 {
			return writeJSON(a.stdout, tokens[0])
		}
		return writeJSON(a.stdout, tokens)
	}
	head := []string{"ACCESSOR_ID"}
	if withSecret {
		head = append(head, "SECRET_ID")
	}
	head = append(head, "DESCRIPTION", "MANAGEMENT", "NAMESPACES", "OPERATOR", "ACL", "CREATE_INDEX")
	t := newTable(a.stdout, head...)
	for _, tok := range tokens {
		row := []string{tok.AccessorID}
		if withSecret {
			row = append(row, tok.SecretID)
		}
		ns, op, acl := namespaceRules(tok.Rules.Namespaces), orDash(tok.Rules.Operator), orDash(tok.Rules.ACL)
		if tok.Management {
			// A management token has every right whatever its rules say.
			ns, op, acl = "*=write", "write", "write"
		}
		row = append(row, orDash(tok.Description), strconv.FormatBool(tok.Management), ns, op, acl, strconv.FormatUint(tok.CreateIndex, 10))
		t.row(row...)
	}
	return t.flush()
}

// namespaceRules prints namespace rules as "ns=level,..." in key order.
func namespaceRules(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}
