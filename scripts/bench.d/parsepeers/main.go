// Command parsepeers times the Go parsers epicenter's parser is compared with (scripts/bench):
// Prometheus 2.42's own text parser (model/textparse, the scrape loop's parser) and
// prometheus/common's expfmt (TextParser.TextToMetricFamilies, what client libraries and
// exporters' tooling use), on the bodies written by bodies.py.
//
// For each FILE it prints one line per parser:
//
//	RESULT parser=<name> body=<file base name> samples=<n> ns_per_sample=<best of runs>
//
// The three ways of reading a body:
//   - textparse: Next() and Series() for every entry, as Prometheus's scrape loop does for a
//     series already in its scrape cache (no labels built: the cache maps the series text);
//   - textparse+labels: the same and Metric() for every sample (labels built, as for a
//     series seen for the first time);
//   - expfmt: TextToMetricFamilies, the whole body into client_model protobuf structs.
//
// Each run parses the body enough times to take at least 100 ms; the best of RUNS (10) runs
// is reported, in nanoseconds per sample line. Built offline in GOPATH mode against
// Debian's Go toolchain and packaged sources (scripts/bench does it).
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

const runs = 10

// textparseSamples reads the body with Prometheus's text parser; withLabels also builds each
// sample's label set. It returns the number of sample entries.
func textparseSamples(body []byte, withLabels bool) int {
	parser := textparse.NewPromParser(body)
	var lset labels.Labels
	samples := 0
	for {
		entry, err := parser.Next()
		if err == io.EOF {
			return samples
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "textparse: %v\n", err)
			os.Exit(1)
		}
		if entry == textparse.EntrySeries {
			parser.Series()
			if withLabels {
				parser.Metric(&lset)
			}
			samples++
		}
	}
}

// expfmtSamples reads the body with expfmt and counts the sample lines it stands for.
func expfmtSamples(body []byte) int {
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(os.Stderr, "expfmt: %v\n", err)
		os.Exit(1)
	}
	samples := 0
	for _, family := range families {
		for _, metric := range family.Metric {
			switch {
			case metric.Histogram != nil:
				samples += len(metric.Histogram.Bucket) + 2
			case metric.Summary != nil:
				samples += len(metric.Summary.Quantile) + 2
			default:
				samples++
			}
		}
	}
	return samples
}

// best times work on the body: the best of runs, per sample, in nanoseconds.
func best(work func() int) (int, float64) {
	samples := work()
	start := time.Now()
	repeat := 0
	for time.Since(start) < 100*time.Millisecond {
		work()
		repeat++
	}
	bestPerSample := 0.0
	for run := 0; run < runs; run++ {
		began := time.Now()
		for i := 0; i < repeat; i++ {
			work()
		}
		perSample := float64(time.Since(began).Nanoseconds()) / float64(repeat*samples)
		if run == 0 || perSample < bestPerSample {
			bestPerSample = perSample
		}
	}
	return samples, bestPerSample
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: parsepeers FILE...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		body, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "parsepeers: %v\n", err)
			os.Exit(1)
		}
		name := filepath.Base(path)
		for _, parser := range []struct {
			name string
			work func() int
		}{
			{"textparse", func() int { return textparseSamples(body, false) }},
			{"textparse+labels", func() int { return textparseSamples(body, true) }},
			{"expfmt", func() int { return expfmtSamples(body) }},
		} {
			samples, ns := best(parser.work)
			fmt.Printf("RESULT parser=%s body=%s samples=%d ns_per_sample=%.1f\n", parser.name, name, samples, ns)
		}
	}
}
