{{/*
Names. The release "sessionops" in namespace "sessionops-system" gives the names the
operator expects by default (ConfigMap sessionops-config, peering sessionops).
*/}}
{{- define "sessionops.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sessionops.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "sessionops.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Standard labels; pass (dict "ctx" $ "component" "operator"). */}}
{{- define "sessionops.labels" -}}
helm.sh/chart: {{ include "sessionops.chart" .ctx }}
{{ include "sessionops.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: sessionops
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sessionops.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sessionops.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sessionops.configMapName" -}}
{{- printf "%s-config" (include "sessionops.fullname" .) -}}
{{- end -}}

{{- define "sessionops.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (include "sessionops.fullname" .) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sessionops.webhookServiceName" -}}
{{- printf "%s-webhook" (include "sessionops.fullname" .) -}}
{{- end -}}

{{- define "sessionops.webhookSecretName" -}}
{{- printf "%s-webhook-tls" (include "sessionops.fullname" .) -}}
{{- end -}}

{{- define "sessionops.webhookCertificateName" -}}
{{- printf "%s-webhook" (include "sessionops.fullname" .) -}}
{{- end -}}

{{- define "sessionops.postgresqlName" -}}
{{- printf "%s-postgresql" (include "sessionops.fullname" .) -}}
{{- end -}}

{{- define "sessionops.replayName" -}}
{{- printf "%s-replay" (include "sessionops.fullname" .) -}}
{{- end -}}

{{/* repository[:tag][@digest] */}}
{{- define "sessionops.imageRef" -}}
{{- $tag := .tag | default "" | toString -}}
{{- $ref := .repository -}}
{{- if $tag }}{{ $ref = printf "%s:%s" $ref $tag }}{{ end -}}
{{- if .digest }}{{ $ref = printf "%s@%s" $ref .digest }}{{ end -}}
{{- $ref -}}
{{- end -}}

{{/* The operator/worker image (one image for both). */}}
{{- define "sessionops.image" -}}
{{- include "sessionops.imageRef" (dict "repository" .Values.image.repository "tag" (default .Chart.AppVersion .Values.image.tag) "digest" .Values.image.digest) -}}
{{- end -}}

{{- define "sessionops.workerImage" -}}
{{- default (include "sessionops.image" .) .Values.worker.image -}}
{{- end -}}

{{/* Namespaces where agents run: each gets the worker ServiceAccount and Role. */}}
{{- define "sessionops.workerNamespaces" -}}
{{- $namespaces := uniq (.Values.workerNamespaces | default list) -}}
{{- if not $namespaces -}}
{{- fail "workerNamespaces: list the namespaces where agents run (e.g. --set 'workerNamespaces={team-a}')" -}}
{{- end -}}
{{- if and (has .Release.Namespace $namespaces) (not .Values.allowWorkersInOperatorNamespace) -}}
{{- fail (printf "workerNamespaces: %q is the release namespace, where the operator's Secrets live (the webhook's TLS key, the database credential); run agents in another namespace, or set allowWorkersInOperatorNamespace=true to accept that" .Release.Namespace) -}}
{{- end -}}
{{- toJson $namespaces -}}
{{- end -}}

{{/* Images an Agent may name in spec.worker.image (glob patterns). */}}
{{- define "sessionops.allowedImages" -}}
{{- $images := .Values.worker.allowedImages -}}
{{- if not $images -}}
{{- $images = list (include "sessionops.workerImage" .) -}}
{{- with .Values.worker.toolsImage -}}
{{- $images = append $images . -}}
{{- end -}}
{{- end -}}
{{- toJson (uniq $images) -}}
{{- end -}}

{{/* Where DATABASE_URL comes from: {"name": secret, "key": key}. */}}
{{- define "sessionops.databaseSecret" -}}
{{- if .Values.externalDatabase.existingSecret -}}
{{- if .Values.postgresql.enabled -}}
{{- fail "externalDatabase.existingSecret is set: also set postgresql.enabled=false (the embedded PostgreSQL would not be used)" -}}
{{- end -}}
{{- toJson (dict "name" .Values.externalDatabase.existingSecret "key" .Values.externalDatabase.existingSecretKey) -}}
{{- else if .Values.postgresql.enabled -}}
{{- toJson (dict "name" (include "sessionops.postgresqlName" .) "key" "DATABASE_URL") -}}
{{- else -}}
{{- fail "no database: enable postgresql.enabled or set externalDatabase.existingSecret (a Secret whose key holds the DATABASE_URL)" -}}
{{- end -}}
{{- end -}}

{{/*
Scenarios of the replay model: the chart's copies of examples/replay plus replay.scenarios.
Returns {"<file>.yaml": "<text>"}.
*/}}
{{- define "sessionops.replayScenarioFiles" -}}
{{- $files := dict -}}
{{- if .Values.replay.includeExamples -}}
{{- range $path, $_ := .Files.Glob "files/replay/*.yaml" -}}
{{- $_ := set $files (base $path) ($.Files.Get $path) -}}
{{- end -}}
{{- end -}}
{{- range $name, $scenario := .Values.replay.scenarios -}}
{{- $s := deepCopy $scenario -}}
{{- if not $s.name }}{{ $_ := set $s "name" $name }}{{ end -}}
{{- $_ := set $files (printf "%s.yaml" $name) (toYaml $s) -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{/* The model catalog: config.models plus replay/<scenario> entries when the replay model runs. */}}
{{- define "sessionops.models" -}}
{{- $models := list -}}
{{- range .Values.config.models -}}
{{- $models = append $models . -}}
{{- end -}}
{{- if and .Values.replay.enabled .Values.replay.registerModels -}}
{{- $endpoint := printf "http://%s.%s.svc:%d/v1" (include "sessionops.replayName" .) .Release.Namespace (int .Values.replay.port) -}}
{{- range $file, $text := (include "sessionops.replayScenarioFiles" . | fromJson) -}}
{{- $scenario := fromYaml $text -}}
{{- $name := $scenario.name | default (trimSuffix ".yaml" $file) -}}
{{- $models = append $models (dict "name" (printf "replay/%s" $name) "provider" "replay" "model" $name "endpoint" $endpoint) -}}
{{- end -}}
{{- end -}}
{{- $names := list -}}
{{- range $models -}}
{{- if has .name $names -}}
{{- fail (printf "config.models: the catalog name %q appears twice" .name) -}}
{{- end -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- toJson $models -}}
{{- end -}}

{{/* Names of the Secrets the catalog references (the worker may read exactly these). */}}
{{- define "sessionops.catalogSecretNames" -}}
{{- $names := list -}}
{{- range (include "sessionops.models" . | fromJsonArray) -}}
{{- if .secretKeyRef -}}
{{- $names = append $names .secretKeyRef.name -}}
{{- end -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end -}}

{{/* Restricted pod security (the "restricted" Pod Security Standard). */}}
{{- define "sessionops.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "sessionops.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
Admission rules: which operations of which kinds reach which kopf webhook.
kopf's webhook server routes POST /<handler id>; the handlers are registered with
id="sessionops-mutate" and id="sessionops-validate". Every (resource, operation)
listed here must have a kopf handler under that id: kopf answers 404 for a
resource with no handler, and failurePolicy Fail then rejects the request.
*/}}
{{- define "sessionops.mutatingRules" -}}
- {resource: agentsessions, operations: [CREATE, UPDATE]}
- {resource: agentinputs, operations: [CREATE, UPDATE]}
- {resource: agents, operations: [CREATE, UPDATE]}
{{- end -}}

{{- define "sessionops.validatingRules" -}}
- {resource: agentsessions, operations: [CREATE, UPDATE]}
- {resource: agentinputs, operations: [CREATE, UPDATE]}
- {resource: agentruns, operations: [UPDATE]}
- {resource: agents, operations: [CREATE, UPDATE]}
{{- end -}}
