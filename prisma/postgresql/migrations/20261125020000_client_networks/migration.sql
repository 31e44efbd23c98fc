-- AlterTable
ALTER TABLE "key_pairs" ADD COLUMN "unlisted_refused_at" TIMESTAMP(3),
ADD COLUMN "unlisted_refused_address" TEXT;

-- CreateTable
CREATE TABLE "partner_networks" (
    "partner_id" TEXT NOT NULL,
    "allow_from" TEXT NOT NULL,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "partner_networks_pkey" PRIMARY KEY ("partner_id")
);
