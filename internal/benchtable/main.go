// Command benchtable reads the output of the side-by-side benchmark suite
// (scripts/bench runs it; see BENCHMARKS.md) and prints each target of
// issue 10 as a ratio against its anchor, from the medians of the runs:
//
//	go run ./internal/benchtable bench.txt
//
// A ratio is taken between figures of the same runs, never between runs,
// since on a shared machine the absolute figures drift from one minute to
// the next while the ratios hold.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	var in io.Reader = os.Stdin
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer func() { _ = f.Close() }() // read only: nothing to lose
		in = f
	}
	r, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := r.print(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// printer writes formatted lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// results holds every value seen, by benchmark name (without the -GOMAXPROCS
// suffix) and unit.
type results map[string]map[string][]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

func parse(in io.Reader) (results, error) {
	r := results{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		if r[name] == nil {
			r[name] = map[string][]float64{}
		}
		// f[1] is the iteration count; then value, unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", name, f[i], err)
			}
			r[name][f[i+1]] = append(r[name][f[i+1]], v)
		}
	}
	return r, sc.Err()
}

// median returns the median of name's unit and how many runs it has; n is 0
// when the run has none.
func (r results) median(name, unit string) (m float64, n int) {
	vs := slices.Clone(r[name][unit])
	if len(vs) == 0 {
		return 0, 0
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], len(vs)
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, len(vs)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func (r results) print(w io.Writer) error {
	p := &printer{w: w}
	p.f("Local: Transport.RoundTrip overhead (RoundTrip less its base) against rate.Limiter.Allow\n")
	p.f("\n")
	p.f("| variant | Allow ns | overhead ns | × Allow (≤ 2) | allocs beyond base (≤ 1) | runs | target |\n")
	p.f("|---|---:|---:|---:|---:|---:|---|\n")
	for _, mode := range []string{"serial", "parallel"} {
		allow, _ := r.median("BenchmarkLocalAllow/rate.Limiter.Allow/"+mode, "ns/op")
		base, _ := r.median("BenchmarkLocalTransport/base/"+mode, "ns/op")
		baseAllocs, _ := r.median("BenchmarkLocalTransport/base/"+mode, "allocs/op")
		for _, v := range []string{"RoundTrip", "RoundTrip.keyed"} {
			name := "BenchmarkLocalTransport/" + v + "/" + mode
			rt, n := r.median(name, "ns/op")
			if n == 0 || allow == 0 {
				continue
			}
			allocs, _ := r.median(name, "allocs/op")
			over, extra := rt-base, allocs-baseAllocs
			target := "(informational)"
			if v == "RoundTrip" {
				target = verdict(over <= 2*allow && extra <= 1)
			}
			p.f("| %s %s | %.1f | %.1f | %.2f | %.0f | %d | %s |\n", v, mode, allow, over, over/allow, extra, n, target)
		}
	}
	p.f("\n")
	p.f("Redis: against redis_rate Allow, one private redis-server, interleaved phases\n")
	p.f("(throughput × > 1 is faster; CPU is client (getrusage) + server (INFO cpu) per call)\n")
	p.f("\n")
	p.f("| variant | goroutines | µs/call | × redis_rate throughput | client+server CPU µs | × redis_rate CPU | allocs/op | runs | target |\n")
	p.f("|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, g := range []string{"1", "64"} {
		name := "BenchmarkRedisInterleaved/goroutines=" + g
		rrT, n := r.median(name, "µs/redis_rate-Allow")
		if n == 0 {
			continue
		}
		rrCPU := r.cpu(name, "redis_rate-Allow")
		for _, op := range []string{"redis_rate-Allow", "floor-evalsha", "store-reserve", "Transport-default-client", "Transport-ContextTimeoutEnabled"} {
			t, _ := r.median(name, "µs/"+op)
			cpu := r.cpu(name, op)
			allocs, _ := r.median("BenchmarkRedis/"+op+"/goroutines="+g, "allocs/op")
			target := "(informational)"
			if op == "Transport-default-client" {
				ok := allocs <= 8
				if g == "1" {
					ok = ok && rrT/t >= 0.9 && cpu/rrCPU <= 1.1
					target = verdict(ok) + " (≥ 0.9×, ≤ 1.1× CPU, ≤ 8 allocs)"
				} else {
					ok = ok && rrT/t >= 2
					target = verdict(ok) + " (≥ 2×, ≤ 8 allocs)"
				}
			}
			p.f("| %s | %s | %.1f | %.2f | %.1f | %.2f | %.0f | %d | %s |\n", op, g, t, rrT/t, cpu, cpu/rrCPU, allocs, n, target)
		}
	}
	return p.err
}

// cpu returns op's median client plus median server CPU per call.
func (r results) cpu(name, op string) float64 {
	c, _ := r.median(name, "client-µs/"+op)
	s, _ := r.median(name, "redis-µs/"+op)
	return c + s
}
