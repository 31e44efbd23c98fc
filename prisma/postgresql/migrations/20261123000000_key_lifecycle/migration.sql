-- AlterTable
ALTER TABLE "partners" ADD COLUMN "tokens_revoked_before" BIGINT;

-- AlterTable
ALTER TABLE "key_pairs" ADD COLUMN "expires_at" TIMESTAMP(3),
ADD COLUMN "last_refused_at" TIMESTAMP(3);
