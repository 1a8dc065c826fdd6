// Command celcheck evaluates the variables of a ValidatingAdmissionPolicy with Kubernetes' own CEL
// environment (the libraries kube-apiserver offers new expressions at compatibility version 1.30,
// the oldest release this driver's admission policies support), without an API server: a fast
// check that a rendered policy compiles and computes what the driver computes.
//
// Usage: celcheck POLICY.json < CASES.jsonl
//
// Each input line is {"object": {...}, "oldObject": {...} | null, "operation": "CREATE"}; each
// output line is {"problem": <variables.problem, or "ERROR in <variable>: ...">, "cost": N}.
// Exit 1 when an expression does not compile. Test tool only (tests/deploy/).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
)

type variable struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
}

type policy struct {
	Spec struct {
		Variables []variable `json:"variables"`
	} `json:"spec"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: celcheck POLICY.json < CASES.jsonl")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var p policy
	if err := json.Unmarshal(raw, &p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	base := environment.MustBaseEnvSet(version.MajorMinor(1, 30), true)
	env, err := base.Env(environment.NewExpressions)
	if err == nil {
		env, err = env.Extend(
			cel.Variable("object", cel.DynType),
			cel.Variable("oldObject", cel.DynType),
			cel.Variable("request", cel.DynType),
			cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	programs := make([]cel.Program, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		ast, iss := env.Compile(v.Expression)
		if iss.Err() != nil {
			fmt.Printf("COMPILE %s: %v\n", v.Name, iss.Err())
			os.Exit(1)
		}
		prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost), cel.CostLimit(1000000))
		if err != nil {
			fmt.Printf("PROGRAM %s: %v\n", v.Name, err)
			os.Exit(1)
		}
		programs[i] = prg
	}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var c map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		vars := map[string]any{}
		act := map[string]any{
			"object":    c["object"],
			"oldObject": c["oldObject"],
			"request":   map[string]any{"operation": c["operation"]},
			"variables": vars,
		}
		out := ""
		var cost uint64
		for i, v := range p.Spec.Variables {
			val, det, err := programs[i].Eval(act)
			if det != nil && det.ActualCost() != nil {
				cost += *det.ActualCost()
			}
			if err != nil {
				out = fmt.Sprintf("ERROR in %s: %v", v.Name, err)
				break
			}
			vars[v.Name] = val.Value()
		}
		if out == "" {
			out = fmt.Sprint(vars["problem"])
		}
		b, _ := json.Marshal(map[string]any{"problem": out, "cost": cost})
		fmt.Println(string(b))
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
