#include "figure_export.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSpinBox>
#include <QSvgGenerator>
#include <qcustomplot.h>

namespace embedlab::views {

namespace {

// QCustomPlot sizes fonts in points for a 96 dpi screen: laying a figure out at
// 96 logical pixels per inch gives type its printed size.
constexpr double kLogicalDpi = 96.0;

// Applies the publication style for the lifetime of the object, then restores.
class PublicationStyle {
public:
    PublicationStyle(QCustomPlot* plot, bool apply) : plot_(plot)
    {
        if (!apply)
            return;
        // QCustomPlot reads back only a background pixmap, not its brush; the views
        // keep QCustomPlot's default solid white brush, restored as such below.
        background_ = plot->background();
        plot->setBackground(QBrush(Qt::white));
        const QFont label("DejaVu Sans", 8), ticks("DejaVu Sans", 7);
        for (auto* rect : plot->axisRects())
            for (auto* axis : rect->axes()) {
                axes_.push_back({axis, axis->labelFont(), axis->tickLabelFont(), axis->basePen(),
                                 axis->tickPen(), axis->subTickPen(), axis->grid()->pen()});
                axis->setLabelFont(label);
                axis->setTickLabelFont(ticks);
                const QPen black(Qt::black, 0.8);
                axis->setBasePen(black);
                axis->setTickPen(black);
                axis->setSubTickPen(black);
                axis->grid()->setPen(QPen(QColor(220, 220, 220), 0.5, Qt::DotLine));
            }
        QVector<QCPLegend*> legends; // inset legends need not be QObject children of the plot
        for (auto* rect : plot->axisRects())
            for (int i = 0; i < rect->insetLayout()->elementCount(); ++i)
                if (auto* legend = qobject_cast<QCPLegend*>(rect->insetLayout()->elementAt(i)))
                    legends.push_back(legend);
        for (auto* legend : legends) {
            legends_.push_back({legend, legend->font(), legend->borderPen()});
            legend->setFont(ticks);
            legend->setBorderPen(Qt::NoPen);
        }
    }
    ~PublicationStyle()
    {
        if (axes_.isEmpty() && legends_.isEmpty())
            return;
        if (background_.isNull())
            plot_->setBackground(QBrush(Qt::white));
        else
            plot_->setBackground(background_);
        for (const auto& a : axes_) {
            a.axis->setLabelFont(a.label);
            a.axis->setTickLabelFont(a.ticks);
            a.axis->setBasePen(a.base);
            a.axis->setTickPen(a.tick);
            a.axis->setSubTickPen(a.subtick);
            a.axis->grid()->setPen(a.grid);
        }
        for (const auto& l : legends_) {
            l.legend->setFont(l.font);
            l.legend->setBorderPen(l.border);
        }
        plot_->replot(QCustomPlot::rpQueuedReplot);
    }

private:
    struct Axis {
        QCPAxis* axis;
        QFont label, ticks;
        QPen base, tick, subtick, grid;
    };
    struct Legend {
        QCPLegend* legend;
        QFont font;
        QPen border;
    };
    QCustomPlot* plot_;
    QPixmap background_;
    QVector<Axis> axes_;
    QVector<Legend> legends_;
};

QString failure(const QString& file, const QString& problem)
{
    return file + ": " + problem;
}

// As QCustomPlot::savePdf sets up its painter: vector output, no pixmap caches,
// the figure's logical size mapped onto the page.
bool vectorPainter(QCPPainter& painter, int width, int height)
{
    if (!painter.isActive())
        return false;
    painter.setMode(QCPPainter::pmVectorized);
    painter.setMode(QCPPainter::pmNoCaching);
    painter.setWindow(0, 0, width, height);
    return true;
}

} // namespace

FigureFormat figureFormat(const QString& file)
{
    const QString suffix = QFileInfo(file).suffix().toLower();
    if (suffix == "png")
        return FigureFormat::Png;
    if (suffix == "pdf")
        return FigureFormat::Pdf;
    if (suffix == "svg")
        return FigureFormat::Svg;
    return FigureFormat::Unknown;
}

QString exportFigure(QCustomPlot* plot, const QString& file, const FigureOptions& o)
{
    const FigureFormat format = figureFormat(file);
    if (format == FigureFormat::Unknown)
        return failure(file, "unknown figure format (use .png, .pdf or .svg)");
    if (!(o.width_in > 0) || !(o.aspect > 0) || o.dpi < 10 || o.dpi > 2400)
        return failure(file, "figure size or DPI out of range");
    const int width = qRound(o.width_in * kLogicalDpi);
    const int height = qRound(o.width_in * o.aspect * kLogicalDpi);
    QSaveFile out(file);
    if (!out.open(QIODevice::WriteOnly))
        return failure(file, out.errorString());
    PublicationStyle style(plot, o.publication);
    bool drawn = true;
    if (format == FigureFormat::Png) {
        const double scale = o.dpi / kLogicalDpi;
        QImage image = plot->toPixmap(width, height, scale).toImage();
        image.setDotsPerMeterX(qRound(o.dpi / 0.0254));
        image.setDotsPerMeterY(qRound(o.dpi / 0.0254));
        drawn = image.save(&out, "PNG");
    } else if (format == FigureFormat::Pdf) {
        QPdfWriter pdf(&out);
        pdf.setResolution(static_cast<int>(kLogicalDpi));
        pdf.setPageSize(QPageSize(QSizeF(o.width_in, o.width_in * o.aspect), QPageSize::Inch));
        pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
        pdf.setCreator("EmbedLab");
        QCPPainter painter(&pdf);
        drawn = vectorPainter(painter, width, height);
        if (drawn)
            plot->toPainter(&painter, width, height);
    } else {
        QSvgGenerator svg;
        svg.setOutputDevice(&out);
        svg.setResolution(static_cast<int>(kLogicalDpi));
        svg.setSize(QSize(width, height));
        svg.setViewBox(QRect(0, 0, width, height));
        svg.setTitle("EmbedLab figure");
        QCPPainter painter(&svg);
        drawn = vectorPainter(painter, width, height);
        if (drawn)
            plot->toPainter(&painter, width, height);
    }
    if (!drawn) {
        out.cancelWriting();
        return failure(file, "could not render the figure");
    }
    if (!out.commit())
        return failure(file, out.errorString());
    return {};
}

FigureExportDialog::FigureExportDialog(QWidget* parent)
    : QDialog(parent), preset_(new QComboBox(this)), aspect_(new QDoubleSpinBox(this)),
      dpi_(new QSpinBox(this)), publication_(new QCheckBox("clean publication style", this))
{
    setWindowTitle("Export figure");
    preset_->addItem("single column (3.5 in)", kSingleColumnInches);
    preset_->addItem("double column (7.2 in)", kDoubleColumnInches);
    preset_->addItem("slide (10 in)", kSlideInches);
    aspect_->setRange(0.2, 2.0);
    aspect_->setSingleStep(0.05);
    aspect_->setValue(0.62);
    dpi_->setRange(72, 1200);
    dpi_->setValue(300);
    dpi_->setSuffix(" dpi (PNG)");
    publication_->setChecked(true);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* form = new QFormLayout(this);
    form->addRow("Width", preset_);
    form->addRow("Height / width", aspect_);
    form->addRow("Resolution", dpi_);
    form->addRow(publication_);
    form->addRow(buttons);
}

FigureOptions FigureExportDialog::options() const
{
    return {.width_in = preset_->currentData().toDouble(),
            .aspect = aspect_->value(),
            .dpi = dpi_->value(),
            .publication = publication_->isChecked()};
}

} // namespace embedlab::views
