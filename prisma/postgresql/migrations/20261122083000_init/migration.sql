-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateTable
CREATE TABLE "partners" (
    "id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'active',
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "partners_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "key_pairs" (
    "id" TEXT NOT NULL,
    "partner_id" TEXT NOT NULL,
    "access_key" TEXT NOT NULL,
    "secret_hash" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'active',
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "superseded_at" TIMESTAMP(3),
    "revoked_at" TIMESTAMP(3),
    "last_used_at" TIMESTAMP(3),

    CONSTRAINT "key_pairs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "company_mappings" (
    "partner_id" TEXT NOT NULL,
    "company_id" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "company_mappings_pkey" PRIMARY KEY ("partner_id","company_id")
);

-- CreateTable
CREATE TABLE "audit_events" (
    "id" SERIAL NOT NULL,
    "at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "actor" TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "partner_id" TEXT,
    "details" TEXT NOT NULL DEFAULT '{}',

    CONSTRAINT "audit_events_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "revision" (
    "id" INTEGER NOT NULL,
    "value" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "revision_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "partners_name_key" ON "partners"("name");

-- CreateIndex
CREATE INDEX "partners_status_id_idx" ON "partners"("status", "id");

-- CreateIndex
CREATE UNIQUE INDEX "key_pairs_access_key_key" ON "key_pairs"("access_key");

-- CreateIndex
CREATE INDEX "key_pairs_partner_id_status_idx" ON "key_pairs"("partner_id", "status");

-- CreateIndex
CREATE INDEX "company_mappings_company_id_idx" ON "company_mappings"("company_id");

-- CreateIndex
CREATE INDEX "audit_events_partner_id_id_idx" ON "audit_events"("partner_id", "id");

-- AddForeignKey
ALTER TABLE "key_pairs" ADD CONSTRAINT "key_pairs_partner_id_fkey" FOREIGN KEY ("partner_id") REFERENCES "partners"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "company_mappings" ADD CONSTRAINT "company_mappings_partner_id_fkey" FOREIGN KEY ("partner_id") REFERENCES "partners"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- At most one active key pair per partner, enforced by the database (the Prisma schema cannot express a
-- partial index, so it lives only here, and test/db/migrations.test.ts knows about it).
CREATE UNIQUE INDEX "key_pairs_one_active_per_partner" ON "key_pairs"("partner_id") WHERE "status" = 'active';

-- The single revision row that every mutating transaction bumps.
INSERT INTO "revision" ("id", "value") VALUES (1, 0);
