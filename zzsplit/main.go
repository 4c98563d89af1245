// Command zzsplit moves files (with the package-level objects they declare)
// between packages of this module and rewrites every reference. Temporary.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

const mod = "github.com/coordinator-project/coordinator/"

type home struct{ path, name string }

func main() {
	// plan file lines: <old file path> <new import path (relative)> [new name]
	// rename lines: rename <old pkg rel>.<Name> <NewName>
	moves := map[string]home{} // abs file -> new home
	renames := map[string]string{}
	f, _ := os.Open(os.Args[1])
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		if fs[0] == "rename" {
			renames[mod+fs[1]] = fs[2]
			continue
		}
		abs, _ := filepath.Abs(fs[0])
		name := filepath.Base(fs[1])
		if len(fs) > 2 {
			name = fs[2]
		}
		moves[abs] = home{mod + fs[1], name}
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports, Tests: true}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		panic(err)
	}
	// object -> new home: objects declared at package level in a moved file
	objHome := map[types.Object]home{}
	key := func(o types.Object) string { return o.Pkg().Path() + "." + o.Name() }
	keyHome := map[string]home{}
	for _, p := range pkgs {
		for i, file := range p.Syntax {
			fn := p.CompiledGoFiles[i]
			h, ok := moves[fn]
			if !ok {
				continue
			}
			for _, d := range file.Decls {
				var names []*ast.Ident
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						names = append(names, d.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							names = append(names, s.Name)
						case *ast.ValueSpec:
							names = append(names, s.Names...)
						}
					}
				}
				for _, n := range names {
					if o := p.TypesInfo.Defs[n]; o != nil && n.Name != "_" {
						objHome[o] = h
						keyHome[key(o)] = h
					}
				}
			}
		}
	}
	done := map[string]bool{}
	for _, p := range pkgs {
		for i, file := range p.Syntax {
			fn := p.CompiledGoFiles[i]
			if done[fn] || !strings.HasPrefix(fn, "/work/") || strings.Contains(fn, "/zzsplit/") {
				continue
			}
			if filepath.Ext(fn) != ".go" {
				continue
			}
			done[fn] = true
			rewrite(p, file, fn, moves, keyHome, key, renames)
		}
	}
}

type edit struct {
	start, end int
	text       string
}

func rewrite(p *packages.Package, file *ast.File, fn string, moves map[string]home, keyHome map[string]home, key func(types.Object) string, renames map[string]string) {
	src, err := os.ReadFile(fn)
	if err != nil {
		panic(err)
	}
	fset := p.Fset
	off := func(pos token.Pos) int { return fset.Position(pos).Offset }
	own := home{p.PkgPath, p.Name}
	own.path = strings.TrimSuffix(own.path, "_test")
	isXTest := strings.HasSuffix(p.Name, "_test")
	if h, ok := moves[fn]; ok {
		own = h
	}
	var edits []edit
	needImports := map[string]string{}
	selX := map[*ast.Ident]bool{}
	ast.Inspect(file, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		pn, ok := p.TypesInfo.Uses[x].(*types.PkgName)
		if !ok {
			return true
		}
		o := p.TypesInfo.Uses[sel.Sel]
		if o == nil {
			return true
		}
		selX[sel.Sel] = true
		name := o.Name()
		if r, ok := renames[key(o)]; ok {
			name = r
		}
		h, moved := keyHome[key(o)]
		if !moved {
			if name != o.Name() {
				edits = append(edits, edit{off(sel.Sel.Pos()), off(sel.Sel.End()), name})
			}
			return true
		}
		_ = pn
		if h.path == own.path && !isXTest {
			edits = append(edits, edit{off(sel.Pos()), off(sel.End()), name})
		} else {
			edits = append(edits, edit{off(sel.Pos()), off(sel.End()), h.name + "." + name})
			needImports[h.path] = h.name
		}
		return true
	})
	for id, o := range p.TypesInfo.Uses {
		if selX[id] || o == nil || o.Pkg() == nil || o.Parent() != o.Pkg().Scope() {
			continue
		}
		if fset.File(id.Pos()) != fset.File(file.Pos()) {
			continue
		}
		name := o.Name()
		if r, ok := renames[key(o)]; ok {
			name = r
		}
		h, moved := keyHome[key(o)]
		if !moved {
			// object stays in its package; if this file moves away from it, qualify
			objPath := o.Pkg().Path()
			if objPath != own.path && o.Pkg().Path() == strings.TrimSuffix(p.PkgPath, "_test") {
				if !o.Exported() {
					fmt.Fprintf(os.Stderr, "UNEXPORTED %s uses %s (stays in %s)\n", fset.Position(id.Pos()), o.Name(), objPath)
				}
				edits = append(edits, edit{off(id.Pos()), off(id.End()), o.Pkg().Name() + "." + name})
				needImports[objPath] = o.Pkg().Name()
			} else if name != o.Name() {
				edits = append(edits, edit{off(id.Pos()), off(id.End()), name})
			}
			continue
		}
		if h.path == own.path {
			if name != o.Name() {
				edits = append(edits, edit{off(id.Pos()), off(id.End()), name})
			}
			continue
		}
		if !o.Exported() {
			fmt.Fprintf(os.Stderr, "UNEXPORTED %s uses %s (moves to %s)\n", fset.Position(id.Pos()), o.Name(), h.path)
		}
		edits = append(edits, edit{off(id.Pos()), off(id.End()), h.name + "." + name})
		needImports[h.path] = h.name
	}
	for id, o := range p.TypesInfo.Defs {
		if o == nil || o.Pkg() == nil || o.Parent() != o.Pkg().Scope() || fset.File(id.Pos()) != fset.File(file.Pos()) {
			continue
		}
		if r, ok := renames[key(o)]; ok {
			edits = append(edits, edit{off(id.Pos()), off(id.End()), r})
		}
	}
	// package clause
	if h, ok := moves[fn]; ok {
		name := h.name
		if isXTest {
			name += "_test"
		}
		edits = append(edits, edit{off(file.Name.Pos()), off(file.Name.End()), name})
	}
	delete(needImports, own.path)
	if len(edits) == 0 && len(needImports) == 0 {
		return
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := append([]byte(nil), src...)
	last := -1
	for _, e := range edits {
		if last >= 0 && e.end > last {
			continue // overlapping
		}
		out = append(out[:e.start:e.start], append([]byte(e.text), out[e.end:]...)...)
		last = e.start
	}
	// imports: add after the "import (" line
	if len(needImports) > 0 {
		var add bytes.Buffer
		paths := make([]string, 0, len(needImports))
		for pth := range needImports {
			paths = append(paths, pth)
		}
		sort.Strings(paths)
		for _, pth := range paths {
			if bytes.Contains(out, []byte(strconv.Quote(pth))) {
				continue
			}
			add.WriteString("\t" + strconv.Quote(pth) + "\n")
		}
		if add.Len() > 0 {
			i := bytes.Index(out, []byte("\nimport (\n"))
			if i >= 0 {
				i += len("\nimport (\n")
				out = append(out[:i:i], append(add.Bytes(), out[i:]...)...)
			} else if j := bytes.Index(out, []byte("\nimport ")); j >= 0 {
				out = append(out[:j+1:j+1], append([]byte("import (\n"+add.String()+")\n"), out[j+1:]...)...)
			} else {
				// after package clause line
				k := bytes.Index(out, []byte("\npackage "))
				if bytes.HasPrefix(out, []byte("package ")) {
					k = -1
				}
				e := bytes.IndexByte(out[k+1:], '\n') + k + 1
				out = append(out[:e+1:e+1], append([]byte("\nimport (\n"+add.String()+")\n"), out[e+1:]...)...)
			}
		}
	}
	if b, err := format.Source(out); err == nil {
		out = b
	} else {
		fmt.Fprintf(os.Stderr, "FORMAT %s: %v\n", fn, err)
	}
	if err := os.WriteFile(fn, out, 0o644); err != nil {
		panic(err)
	}
}
