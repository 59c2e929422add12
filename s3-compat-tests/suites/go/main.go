// s3compat-go: the Go clients of s3-compat-tests, one binary for both. S3COMPAT_CLIENT picks the
// checks: "go-v2" (AWS SDK for Go v2, aws.go) or "minio-go" (minio-go v7, minio.go). The runner
// (s3-compat-tests/run) builds it in GOPATH mode against Debian's packaged sources, with no
// module download, and sets the S3COMPAT_* variables compat.go reads.

package main

import (
	"context"
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
)

// What the version records read from the sources the binary was built from: the packaged
// modules keep their versions in unexported constants.
var (
	goModuleVersion     = regexp.MustCompile(`goModuleVersion\s*=\s*"([^"]+)"`)
	minioLibraryVersion = regexp.MustCompile(`libraryVersion\s*=\s*"([^"]+)"`)
)

// debianGopath is where Debian's golang-*-dev packages put their sources, which the runner
// builds against.
const debianGopath = "/usr/share/gocode"

// sourceVersion finds pattern's first group in the file rel (relative to a src directory of
// GOPATH, the runner's one first).
func sourceVersion(rel string, pattern *regexp.Regexp) string {
	roots := append([]string{debianGopath}, filepath.SplitList(os.Getenv("GOPATH"))...)
	roots = append(roots, build.Default.GOPATH)
	for _, root := range roots {
		text, err := os.ReadFile(filepath.Join(root, "src", rel))
		if err != nil {
			continue
		}
		if m := pattern.FindSubmatch(text); m != nil {
			return string(m[1])
		}
	}
	return "(unknown version)"
}

func goVersion() string { return runtime.Version() }

func main() {
	settings, err := loadSettings()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	suite := newSuite(settings)
	switch settings.Client {
	case "go-v2":
		suite.Version(awsVersion())
		awsChecks(suite, settings)
	case "minio-go":
		suite.Version(minioVersion())
		minioChecks(suite, settings)
	default:
		fmt.Fprintf(os.Stderr, "S3COMPAT_CLIENT is %q: go-v2 or minio-go\n", settings.Client)
		os.Exit(2)
	}
	os.Exit(suite.Run(context.Background()))
}
