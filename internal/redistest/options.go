package redistest

// Option customises a server started by Start or StartCluster. The zero value
// is not useful; build Options with the With functions.
type Option interface {
	apply(*config)
}

// config collects everything the Options set.
type config struct {
	args []string // extra redis-server command-line arguments
	tls  bool     // serve TLS only, with generated certificates
	acl  []string // aclfile lines; nil means no aclfile
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithArgs appends redis-server command-line arguments, in the same form as on
// a shell: WithArgs("--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru").
// They come after the package's own arguments, so for single-valued settings
// they win (e.g. "--cluster-node-timeout", "500"). Overriding --port, --dir or
// the TLS settings breaks the Server's bookkeeping; don't. WithArgs may be
// given several times; the arguments accumulate.
func WithArgs(args ...string) Option {
	return optionFunc(func(c *config) { c.args = append(c.args, args...) })
}

// WithTLS makes the server accept TLS connections only: it listens with
// --tls-port on a free port and --port 0, using a throwaway CA, server and
// client certificate generated for the test. Clients must present the client
// certificate; Server.TLSConfig returns a matching *tls.Config, and Server.Client
// and Server.ClientAs use it automatically. Start fails the test if
// redis-server was built without TLS support.
func WithTLS() Option {
	return optionFunc(func(c *config) { c.tls = true })
}

// WithACL writes lines to an aclfile in the server's temporary directory and
// starts the server with --aclfile. Each line is one ACL rule in aclfile
// syntax, for example
//
//	"user fleet on >pw ~throttle:* &* -@all +evalsha +eval +script|load +time +ping"
//
// If no line configures the "default" user it keeps Redis's default (no
// password, all permissions), so Server.Client still works; use
// Server.ClientAs to connect as another user. WithACL may be given several
// times; the lines accumulate.
func WithACL(lines ...string) Option {
	return optionFunc(func(c *config) { c.acl = append(c.acl, lines...) })
}
