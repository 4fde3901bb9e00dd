package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// envPrefix starts the environment variable of every flag: --http-addr ⇔ ROSTER_HTTP_ADDR.
const envPrefix = "ROSTER_"

// envName is the environment variable that mirrors a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv sets every flag of fs that was not given on the command line from its
// environment variable, when that is set; a flag given explicitly always wins. A value
// the flag cannot parse is an error naming the variable. The value is applied as if the
// flag were given once (a comma-separated slice flag such as --cluster splits it).
func bindEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		name := envName(f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q: %w", name, v, e)
		}
	})
	return err
}
