// Package deploy holds no code: it is the Kubernetes manifests in this
// directory (a kustomize base and the dev and production overlays, the CRDs
// they need, the Endpoint Picker config) and the tests that check them. The
// tests render every overlay with the kustomize library, decode each object
// strictly into its Kubernetes or Gateway API Go type, validate the
// InferencePool and InferenceObjective against their CRD schemas, load the
// rendered coordinator config with the coordinator's own loader, and route
// requests through the rendered HTTPRoutes. See README.md.
package deploy
