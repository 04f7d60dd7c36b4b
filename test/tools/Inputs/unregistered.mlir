// An op of a dialect no one registered (test/tools/mla-compile.test).
func.func @f() {
  "foo.bar"() : () -> ()
  return
}
