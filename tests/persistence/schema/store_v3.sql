BEGIN TRANSACTION;
CREATE TABLE kgot_commits (
	entity_id INTEGER NOT NULL, 
	version BIGINT NOT NULL, 
	run_id VARCHAR, 
	step VARCHAR NOT NULL, 
	tool_call TEXT, 
	source_ref TEXT, 
	summary TEXT NOT NULL, 
	committed_at DATETIME NOT NULL, 
	result_key TEXT, 
	PRIMARY KEY (entity_id, version), 
	FOREIGN KEY(entity_id) REFERENCES kgot_entities (id) ON DELETE CASCADE
);
CREATE TABLE kgot_edges (
	row_id INTEGER NOT NULL, 
	entity_id INTEGER NOT NULL, 
	source VARCHAR NOT NULL, 
	target VARCHAR NOT NULL, 
	"key" VARCHAR NOT NULL, 
	relationship VARCHAR NOT NULL, 
	type_version INTEGER, 
	properties JSON NOT NULL, 
	confidence FLOAT NOT NULL, 
	source_kind VARCHAR(16) NOT NULL, 
	run_id VARCHAR, 
	step VARCHAR, 
	tool_call TEXT, 
	source_ref TEXT, 
	corroborations INTEGER DEFAULT 1 NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	reinforced_at DATETIME, 
	expires_at DATETIME, 
	valid_from_version BIGINT NOT NULL, 
	valid_to_version BIGINT, 
	superseded_by BIGINT, 
	superseded_at DATETIME, 
	sources JSON, closed_reason VARCHAR(16) CONSTRAINT kgot_edges_closed_reason CHECK (closed_reason IS NULL OR closed_reason IN ('changed', 'removed', 'contradicted', 'merged', 'expired', 'pruned')), 
	PRIMARY KEY (row_id), 
	CONSTRAINT kgot_edges_confidence CHECK (confidence >= 0 AND confidence <= 1), 
	CONSTRAINT kgot_edges_source_kind CHECK (source_kind IN ('extracted', 'inferred', 'ambiguous')), 
	FOREIGN KEY(entity_id) REFERENCES kgot_entities (id) ON DELETE CASCADE
);
CREATE TABLE kgot_embeddings (
	entity_id INTEGER NOT NULL, 
	model VARCHAR NOT NULL, 
	node_id VARCHAR NOT NULL, 
	dimension INTEGER NOT NULL, 
	vector BLOB NOT NULL, 
	text_hash VARCHAR(64) NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (entity_id, model, node_id), 
	CONSTRAINT kgot_embeddings_dimension CHECK (dimension > 0), 
	FOREIGN KEY(entity_id) REFERENCES kgot_entities (id) ON DELETE CASCADE
);
CREATE TABLE kgot_entities (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	name VARCHAR NOT NULL, 
	description TEXT DEFAULT '' NOT NULL, 
	version BIGINT DEFAULT 0 NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	UNIQUE (name)
);
CREATE TABLE kgot_fact_use (
	entity_id INTEGER NOT NULL, 
	kind VARCHAR(4) NOT NULL, 
	fact_key TEXT NOT NULL, 
	strength FLOAT DEFAULT 0 NOT NULL, 
	uses INTEGER DEFAULT 0 NOT NULL, 
	good INTEGER DEFAULT 0 NOT NULL, 
	bad INTEGER DEFAULT 0 NOT NULL, 
	last_used_at DATETIME, 
	PRIMARY KEY (entity_id, kind, fact_key), 
	CONSTRAINT kgot_fact_use_kind CHECK (kind IN ('node', 'edge')), 
	CONSTRAINT kgot_fact_use_strength CHECK (strength >= 0 AND strength <= 1), 
	FOREIGN KEY(entity_id) REFERENCES kgot_entities (id) ON DELETE CASCADE
);
CREATE TABLE kgot_migrations (
	version INTEGER NOT NULL, 
	description TEXT NOT NULL, 
	applied_at DATETIME NOT NULL, 
	PRIMARY KEY (version)
);
INSERT INTO "kgot_migrations" VALUES(1,'create entities, types, nodes, edges, commits and runs tables; install the global starter types','2026-01-01 00:00:00.000000');
INSERT INTO "kgot_migrations" VALUES(2,'memory upkeep: why each fact closed, type upkeep settings, fact use, suggestions, embeddings','2026-01-01 00:00:00.000000');
INSERT INTO "kgot_migrations" VALUES(3,'run events: each run''s trace, step by step','2026-01-01 00:00:00.000000');
CREATE TABLE kgot_nodes (
	row_id INTEGER NOT NULL, 
	entity_id INTEGER NOT NULL, 
	node_id VARCHAR NOT NULL, 
	label VARCHAR NOT NULL, 
	type_version INTEGER, 
	properties JSON NOT NULL, 
	confidence FLOAT NOT NULL, 
	source_kind VARCHAR(16) NOT NULL, 
	run_id VARCHAR, 
	step VARCHAR, 
	tool_call TEXT, 
	source_ref TEXT, 
	corroborations INTEGER DEFAULT 1 NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	reinforced_at DATETIME, 
	expires_at DATETIME, 
	valid_from_version BIGINT NOT NULL, 
	valid_to_version BIGINT, 
	superseded_by BIGINT, 
	superseded_at DATETIME, 
	sources JSON, 
	canonical_id VARCHAR, closed_reason VARCHAR(16) CONSTRAINT kgot_nodes_closed_reason CHECK (closed_reason IS NULL OR closed_reason IN ('changed', 'removed', 'contradicted', 'merged', 'expired', 'pruned')), 
	PRIMARY KEY (row_id), 
	CONSTRAINT kgot_nodes_confidence CHECK (confidence >= 0 AND confidence <= 1), 
	CONSTRAINT kgot_nodes_source_kind CHECK (source_kind IN ('extracted', 'inferred', 'ambiguous')), 
	FOREIGN KEY(entity_id) REFERENCES kgot_entities (id) ON DELETE CASCADE
);
CREATE TABLE kgot_run_events (
	run_id VARCHAR NOT NULL, 
	seq INTEGER NOT NULL, 
	kind VARCHAR(32) NOT NULL, 
	event JSON NOT NULL, 
	recorded_at DATETIME NOT NULL, 
	PRIMARY KEY (run_id, seq), 
	FOREIGN KEY(run_id) REFERENCES kgot_runs (run_id) ON DELETE CASCADE
);
CREATE TABLE kgot_runs (
	run_id VARCHAR NOT NULL, 
	entity_id INTEGER, 
	question TEXT NOT NULL, 
	options JSON NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	answer TEXT, 
	totals JSON, 
	attempts INTEGER DEFAULT 1 NOT NULL, 
	started_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	owner TEXT, 
	PRIMARY KEY (run_id), 
	FOREIGN KEY(entity_id) REFERENCES kgot_entities (id) ON DELETE CASCADE
);
CREATE TABLE kgot_suggestions (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	entity_id INTEGER NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	payload JSON NOT NULL, 
	payload_key VARCHAR(64) NOT NULL, 
	score FLOAT NOT NULL, 
	status VARCHAR(8) NOT NULL, 
	created_at DATETIME NOT NULL, 
	decided_at DATETIME, 
	CONSTRAINT kgot_suggestions_kind CHECK (kind IN ('merge', 'contradiction')), 
	CONSTRAINT kgot_suggestions_status CHECK (status IN ('open', 'accepted', 'rejected')), 
	FOREIGN KEY(entity_id) REFERENCES kgot_entities (id) ON DELETE CASCADE
);
CREATE TABLE kgot_types (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	entity_id INTEGER, 
	kind VARCHAR(4) NOT NULL, 
	name VARCHAR NOT NULL, 
	version INTEGER NOT NULL, 
	description TEXT NOT NULL, 
	properties_schema JSON NOT NULL, 
	example JSON, 
	source_types JSON, 
	target_types JSON, 
	created_by VARCHAR(8) NOT NULL, 
	justification TEXT DEFAULT '' NOT NULL, 
	run_id VARCHAR, 
	created_at DATETIME NOT NULL, 
	retired_at DATETIME, 
	retired_reason VARCHAR(8), upkeep JSON, 
	CONSTRAINT kgot_types_kind CHECK (kind IN ('node', 'edge')), 
	CONSTRAINT kgot_types_created_by CHECK (created_by IN ('system', 'agent', 'user')), 
	FOREIGN KEY(entity_id) REFERENCES kgot_entities (id) ON DELETE CASCADE
);
INSERT INTO "kgot_types" VALUES(1,NULL,'node','Person',1,'A human being, real or fictional.','{"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}, "aliases": {"type": "array", "items": {"type": "string"}}, "born": {"type": "string", "format": "date"}, "died": {"type": "string", "format": "date"}, "description": {"type": "string"}}}','{"name": "Ada Lovelace", "born": "1815-12-10"}',NULL,NULL,'system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"identity": [], "functional": ["born", "died"], "half_life_days": null, "ttl_days": null, "rank_weight": 0.6}');
INSERT INTO "kgot_types" VALUES(2,NULL,'node','Organization',1,'A company, institution, government body, team or other group acting as one.','{"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}, "aliases": {"type": "array", "items": {"type": "string"}}, "founded": {"type": "string", "format": "date"}, "description": {"type": "string"}}}','{"name": "Acme Corporation", "founded": "1947-03-01"}',NULL,NULL,'system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"identity": [], "functional": ["founded"], "half_life_days": null, "ttl_days": null, "rank_weight": 0.6}');
INSERT INTO "kgot_types" VALUES(3,NULL,'node','Place',1,'A geographic location such as a country, city, address or region.','{"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}, "country": {"type": "string"}, "latitude": {"type": "number", "minimum": -90, "maximum": 90}, "longitude": {"type": "number", "minimum": -180, "maximum": 180}}}','{"name": "Zurich", "country": "Switzerland"}',NULL,NULL,'system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"identity": [], "functional": ["latitude", "longitude"], "half_life_days": null, "ttl_days": null, "rank_weight": 0.5}');
INSERT INTO "kgot_types" VALUES(4,NULL,'node','Event',1,'Something that happened or will happen at a point or span of time.','{"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}, "date": {"type": "string", "format": "date"}, "start": {"type": "string", "format": "date-time"}, "end": {"type": "string", "format": "date-time"}, "description": {"type": "string"}}}','{"name": "Apollo 11 landing", "date": "1969-07-20"}',NULL,NULL,'system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"identity": [], "functional": ["date", "start", "end"], "half_life_days": null, "ttl_days": null, "rank_weight": 0.5}');
INSERT INTO "kgot_types" VALUES(5,NULL,'node','Document',1,'A source of information - a web page, file, article, report, book or message.','{"type": "object", "required": ["title"], "properties": {"title": {"type": "string", "minLength": 1}, "url": {"type": "string", "format": "uri"}, "published": {"type": "string", "format": "date"}, "author": {"type": "string"}, "summary": {"type": "string"}}}','{"title": "Annual Report 2023", "url": "https://example.com/report.pdf"}',NULL,NULL,'system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"identity": ["url"], "functional": ["published"], "half_life_days": 365.0, "ttl_days": null, "rank_weight": 0.4}');
INSERT INTO "kgot_types" VALUES(6,NULL,'node','Product',1,'A good, service, software, financial instrument or other offering.','{"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}, "category": {"type": "string"}, "released": {"type": "string", "format": "date"}, "description": {"type": "string"}}}','{"name": "Model T", "category": "automobile"}',NULL,NULL,'system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"identity": [], "functional": ["released"], "half_life_days": 730.0, "ttl_days": null, "rank_weight": 0.5}');
INSERT INTO "kgot_types" VALUES(7,NULL,'node','Concept',1,'An idea, topic, field, category or term that facts can be about.','{"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}, "definition": {"type": "string"}}}','{"name": "photosynthesis", "definition": "conversion of light into chemical energy"}',NULL,NULL,'system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"identity": [], "functional": [], "half_life_days": null, "ttl_days": null, "rank_weight": 0.4}');
INSERT INTO "kgot_types" VALUES(8,NULL,'node','Quantity',1,'A measured or stated value with its unit, e.g. a price, a count or a distance.','{"type": "object", "required": ["value"], "properties": {"value": {"type": ["number", "string"]}, "unit": {"type": "string"}, "as_of": {"type": "string", "format": "date"}, "description": {"type": "string"}}}','{"value": 384400, "unit": "km", "description": "mean Earth-Moon distance"}',NULL,NULL,'system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"identity": [], "functional": ["value", "unit", "as_of"], "half_life_days": 180.0, "ttl_days": null, "rank_weight": 0.5}');
INSERT INTO "kgot_types" VALUES(9,NULL,'node','Thing',1,'Anything no other type fits. Prefer a specific type; when several facts need this one, propose a proper type with create_node_type instead.','{"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}, "description": {"type": "string"}}}','{"name": "Rosetta Stone", "description": "inscribed stele"}',NULL,NULL,'system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"identity": [], "functional": [], "half_life_days": null, "ttl_days": null, "rank_weight": 0.3}');
INSERT INTO "kgot_types" VALUES(10,NULL,'edge','related_to',1,'A relation no more specific edge type fits; say how in `description`.','{"type": "object", "properties": {"description": {"type": "string"}}}','{"description": "rivals"}','[]','[]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"functional": false, "half_life_days": 730.0, "ttl_days": null, "rank_weight": 0.3}');
INSERT INTO "kgot_types" VALUES(11,NULL,'edge','part_of',1,'The source is a part, member or component of the target.','{"type": "object"}',NULL,'[]','[]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,NULL);
INSERT INTO "kgot_types" VALUES(12,NULL,'edge','located_in',1,'The source is situated in the target place.','{"type": "object"}',NULL,'[]','["Place"]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"functional": false, "half_life_days": 730.0, "ttl_days": null, "rank_weight": 0.5}');
INSERT INTO "kgot_types" VALUES(13,NULL,'edge','works_for',1,'The source person is employed by or serves the target organization.','{"type": "object", "properties": {"role": {"type": "string"}, "since": {"type": "string", "format": "date"}, "until": {"type": "string", "format": "date"}}}','{"role": "chief engineer", "since": "2019-04-01"}','["Person"]','["Organization"]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"functional": false, "half_life_days": 730.0, "ttl_days": null, "rank_weight": 0.5}');
INSERT INTO "kgot_types" VALUES(14,NULL,'edge','created',1,'The source made, wrote, founded, built or published the target.','{"type": "object", "properties": {"date": {"type": "string", "format": "date"}}}','{"date": "1843-09-01"}','["Person", "Organization"]','[]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,NULL);
INSERT INTO "kgot_types" VALUES(15,NULL,'edge','owns',1,'The source owns or holds the target (share of ownership in `share`, 0 to 1).','{"type": "object", "properties": {"share": {"type": "number", "minimum": 0, "maximum": 1}, "since": {"type": "string", "format": "date"}}}','{"share": 0.25}','["Person", "Organization"]','[]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"functional": false, "half_life_days": 730.0, "ttl_days": null, "rank_weight": 0.5}');
INSERT INTO "kgot_types" VALUES(16,NULL,'edge','participated_in',1,'The source took part in the target event.','{"type": "object", "properties": {"role": {"type": "string"}}}',NULL,'[]','["Event"]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,NULL);
INSERT INTO "kgot_types" VALUES(17,NULL,'edge','mentions',1,'The source document mentions or is about the target.','{"type": "object"}',NULL,'["Document"]','[]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,NULL);
INSERT INTO "kgot_types" VALUES(18,NULL,'edge','has_quantity',1,'The source has the target measured or stated value; say what in `measure`.','{"type": "object", "properties": {"measure": {"type": "string"}}}','{"measure": "market capitalization"}','[]','["Quantity"]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,'{"functional": false, "half_life_days": 180.0, "ttl_days": null, "rank_weight": 0.5}');
INSERT INTO "kgot_types" VALUES(19,NULL,'edge','instance_of',1,'The source is an instance or example of the target concept.','{"type": "object"}',NULL,'[]','["Concept"]','system','kgot starter type',NULL,'2026-11-29 11:09:03.324047',NULL,NULL,NULL);
CREATE UNIQUE INDEX kgot_types_current_uq ON kgot_types (coalesce(entity_id, 0), kind, name) WHERE retired_at IS NULL;
CREATE UNIQUE INDEX kgot_types_version_uq ON kgot_types (coalesce(entity_id, 0), kind, name, version);
CREATE INDEX kgot_nodes_until ON kgot_nodes (entity_id, valid_to_version);
CREATE INDEX kgot_nodes_history ON kgot_nodes (entity_id, node_id, valid_from_version);
CREATE UNIQUE INDEX kgot_nodes_current_uq ON kgot_nodes (entity_id, node_id) WHERE valid_to_version IS NULL;
CREATE INDEX kgot_nodes_since ON kgot_nodes (entity_id, valid_from_version);
CREATE UNIQUE INDEX kgot_edges_current_uq ON kgot_edges (entity_id, source, target, "key") WHERE valid_to_version IS NULL;
CREATE INDEX kgot_edges_current_target ON kgot_edges (entity_id, target) WHERE valid_to_version IS NULL;
CREATE INDEX kgot_edges_history ON kgot_edges (entity_id, source, target, "key", valid_from_version);
CREATE INDEX kgot_edges_until ON kgot_edges (entity_id, valid_to_version);
CREATE INDEX kgot_edges_since ON kgot_edges (entity_id, valid_from_version);
CREATE UNIQUE INDEX kgot_commits_result_uq ON kgot_commits (entity_id, result_key) WHERE result_key IS NOT NULL;
CREATE INDEX kgot_runs_recent ON kgot_runs (started_at);
CREATE INDEX kgot_runs_entity ON kgot_runs (entity_id, started_at);
CREATE INDEX kgot_suggestions_status ON kgot_suggestions (entity_id, status);
CREATE INDEX kgot_suggestions_payload ON kgot_suggestions (entity_id, kind, payload_key);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('kgot_types',19);
COMMIT;