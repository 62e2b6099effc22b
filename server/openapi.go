package server

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/kyuhq/kyu/backend"
)

// openAPISchemas are the document's component schemas (JSON Schema
// 2020-12, as OpenAPI 3.1 uses); the paths are built from the route table,
// so the document lists exactly the routes served.
//
//go:embed openapi_schemas.json
var openAPISchemas []byte

// intParams are the query parameters that take integers.
func isIntParam(name string) bool { return name == "limit" || name == "minutes" }

// openAPI builds the OpenAPI 3.1 document of the server's routes.
func (s *Server) openAPI() ([]byte, error) {
	var schemas map[string]any
	if err := json.Unmarshal(openAPISchemas, &schemas); err != nil {
		return nil, fmt.Errorf("server: openapi schemas: %w", err)
	}
	s.addLimits(schemas)
	errResp := map[string]any{"description": "An error", "content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}}
	paths := map[string]map[string]any{}
	for _, rt := range s.routes {
		op := map[string]any{
			"summary":     rt.summary,
			"operationId": operationID(rt),
			"responses":   map[string]any{"default": errResp},
		}
		resp := map[string]any{"description": http.StatusText(rt.ok)}
		switch {
		case rt.stream:
			resp["content"] = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"type": "string"}}}
		case rt.path == "/metrics":
			resp["content"] = map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}
		case rt.okSchema != "":
			resp["content"] = map[string]any{"application/json": map[string]any{"schema": ref(rt.okSchema)}}
		}
		op["responses"].(map[string]any)[strconv.Itoa(rt.ok)] = resp
		if rt.body != "" {
			op["requestBody"] = map[string]any{"required": rt.method != "POST" || rt.body != "ClaimRequest" && rt.body != "MaintenanceRequest",
				"content": map[string]any{"application/json": map[string]any{"schema": ref(rt.body)}}}
		}
		var params []any
		for _, seg := range strings.Split(rt.path, "/") {
			if strings.HasPrefix(seg, "{") {
				params = append(params, map[string]any{"name": strings.Trim(seg, "{}"), "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
			}
		}
		for _, q := range rt.params {
			schema := map[string]any{"type": "string"}
			if isIntParam(q) {
				schema = map[string]any{"type": "integer"}
			}
			if rt.path == "/api/v1/wakeups" {
				schema = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
			}
			params = append(params, map[string]any{"name": q, "in": "query", "required": false, "schema": schema})
		}
		if rt.auth {
			op["security"] = []any{map[string]any{"bearer": []any{}}}
		} else {
			op["security"] = []any{}
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "kyu",
			"version":     "1",
			"description": "The kyu REST API: enqueue and read jobs, the worker side, admin operations, events.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":         schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
	return encodeJSON(doc)
}

// addLimits writes the size limits into the schemas: the per-job limits
// of package backend and this server's configured ones. Sizes are bytes;
// x-kyu-max-bytes gives a bound that JSON Schema cannot say (the bytes of
// a payload, the keys and values of metadata together).
func (s *Server) addLimits(schemas map[string]any) {
	props := schemas["NewJob"].(map[string]any)["properties"].(map[string]any)
	set := func(field string, kv ...any) {
		p := props[field].(map[string]any)
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
	}
	set("type", "maxLength", backend.MaxType)
	set("queue", "maxLength", 128)
	set("title", "maxLength", backend.MaxTitle)
	set("unique_key", "maxLength", 1024)
	set("jid", "maxLength", backend.MaxJID)
	set("tags", "maxItems", backend.MaxTags)
	props["tags"].(map[string]any)["items"].(map[string]any)["maxLength"] = backend.MaxTag
	set("metadata", "x-kyu-max-bytes", backend.MaxMetadata, "description", "Keys and values together at most x-kyu-max-bytes bytes")
	set("payload", "x-kyu-max-bytes", s.cfg.MaxPayload)
	set("payload_b64", "x-kyu-max-bytes", s.cfg.MaxPayload)
	batch := schemas["EnqueueBody"].(map[string]any)["oneOf"].([]any)[1].(map[string]any)
	batch["maxItems"] = s.cfg.MaxBatch
}

// ref points at a component schema.
func ref(name string) map[string]any {
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// operationID names a route's operation: method and path in camel case.
func operationID(rt route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(rt.method))
	for _, seg := range strings.Split(rt.path, "/") {
		seg = strings.Trim(seg, "{}")
		if seg == "" || seg == "api" || seg == "v1" {
			continue
		}
		seg = strings.ReplaceAll(seg, ".", "")
		b.WriteString(strings.ToUpper(seg[:1]) + seg[1:])
	}
	return b.String()
}

// handleOpenAPI serves GET /api/v1/openapi.json.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.openAPIDoc)
}
