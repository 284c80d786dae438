// Package pb holds the Go code generated from proto/ (pb/basra/v1), committed as Go modules
// usually keep theirs: the module builds with `go build` alone, no generator needed. This test
// regenerates it with the pinned buf and plugins and fails if anything differs, so the
// committed stubs cannot drift from rules.proto or from the generators' versions.
package pb

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The tools the repository's set-up installs (.ci/setup), relative to this folder.
var (
	buf     = filepath.Join("..", "..", "..", ".ci", "tools", "node_modules", ".bin", "buf")
	plugins = filepath.Join("..", "..", "..", ".ci", "tools", "go", "bin")
)

// generated lists the generated files under root, by path relative to it.
func generated(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil || entry.IsDir() || !strings.HasSuffix(path, ".pb.go") {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		relative, err := filepath.Rel(root, path)
		files[relative] = text
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestRegeneratingChangesNothing(t *testing.T) {
	tools, err := filepath.Abs(plugins)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{buf, filepath.Join(tools, "protoc-gen-go"), filepath.Join(tools, "protoc-gen-go-grpc")} {
		if _, err := os.Stat(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing: the test command's set-up installs it", tool)
			}
			t.Skipf("%s is missing: run `bash .ci/setup dev` at the repository root", tool)
		}
	}
	out := t.TempDir()
	command, err := filepath.Abs(buf)
	if err != nil {
		t.Fatal(err)
	}
	// From the module's folder, with its buf.gen.yaml, into a fresh folder.
	generate := exec.Command(command, "generate", "--output", out)
	generate.Dir = ".."
	generate.Env = append(os.Environ(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"))
	if output, err := generate.CombinedOutput(); err != nil {
		t.Fatalf("buf generate: %v\n%s", err, output)
	}
	fresh, committed := generated(t, filepath.Join(out, "pb")), generated(t, ".")
	if len(committed) == 0 {
		t.Fatal("no generated file is committed")
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range fresh {
			if !yield(name) {
				return
			}
		}
		for name := range committed {
			if _, both := fresh[name]; !both && !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		if !bytes.Equal(fresh[name], committed[name]) {
			t.Errorf("pb/%s differs from what buf generate writes: regenerate it (buf.gen.yaml says how)", name)
		}
	}
}
