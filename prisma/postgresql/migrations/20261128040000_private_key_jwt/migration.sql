-- AlterTable
ALTER TABLE "partners" ADD COLUMN "credentials_policy" TEXT NOT NULL DEFAULT 'both';

-- AlterTable: a public_key pair has no secret.
ALTER TABLE "key_pairs" ALTER COLUMN "secret_hash" DROP NOT NULL;

-- AlterTable
ALTER TABLE "key_pairs" ADD COLUMN "kind" TEXT NOT NULL DEFAULT 'secret',
ADD COLUMN "public_key" TEXT,
ADD COLUMN "public_key_alg" TEXT,
ADD COLUMN "kid" TEXT;

-- CreateTable
CREATE TABLE "assertion_jtis" (
    "key_pair_id" TEXT NOT NULL,
    "jti" TEXT NOT NULL,
    "expires_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "assertion_jtis_pkey" PRIMARY KEY ("key_pair_id","jti")
);

-- CreateIndex
CREATE UNIQUE INDEX "key_pairs_kid_key" ON "key_pairs"("kid");

-- CreateIndex
CREATE INDEX "assertion_jtis_expires_at_idx" ON "assertion_jtis"("expires_at");
